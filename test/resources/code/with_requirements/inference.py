"""handler using a package that only requirements.txt installs."""

import json

import sagemaker_tfs_testpkg


def handler(data, context):
    return json.dumps({"package": sagemaker_tfs_testpkg.MARKER}), "application/json"
