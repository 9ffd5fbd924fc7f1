"""handler using a package that requirements.txt installs from the package index at start-up."""

import json

import tabulate


def handler(data, context):
    rows = json.loads(data.read())
    body = {"table": tabulate.tabulate(rows, tablefmt="plain"), "version": tabulate.__version__}
    return json.dumps(body), "application/json"
