"""input_handler + output_handler in the shape most examples have: the body passed on as it
is, the model server's answer passed back as it is (no status check of its own)."""


def input_handler(data, context):
    return data.read().decode("utf-8")


def output_handler(response, context):
    return response.content, context.accept_header
