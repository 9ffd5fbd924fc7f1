"""handler importing a module from code/lib; requirements.txt must not be installed."""

import json

import helper_lib


def handler(data, context):
    return json.dumps({"lib": helper_lib.MARKER}), "application/json"
