import io
import json

import grpc
import numpy as np
from PIL import Image
from tensorflow.compat.v1 import make_tensor_proto
from tensorflow.keras.preprocessing import image
from tensorflow_serving.apis import predict_pb2
from tensorflow_serving.apis import prediction_service_pb2_grpc

HEIGHT = 224
WIDTH = 224
MAX_GRPC_MESSAGE_LENGTH = 512 * 1024 * 1024


def handler(data, context):
    # Pre-processing
    if context.request_content_type == 'application/x-image':
        stream = io.BytesIO(data.read())
        img = Image.open(stream).convert('RGB')
        img = img.resize((WIDTH, HEIGHT))
        img_array = image.img_to_array(img)
        #Add additional model specific preprocessing
        img_array = img_array.reshape((HEIGHT, WIDTH, 3)).astype(np.uint8) #"channels_last"
        x = np.expand_dims(img_array, axis=0) #"(1,HEIGHT,WIDTH,3)
        instance = x
    else:
        raise ValueError(f'Unsupported content type: {context.request_content_type}')

    # gRPC communication with TFS
    request = predict_pb2.PredictRequest()
    request.model_spec.name = 'mobilenet_v2'
    # specify the serving signature from the model
    request.model_spec.signature_name = 'serving_default'
    request.inputs['input_1'].CopyFrom(make_tensor_proto(instance, dtype=np.float32))
    options = [
        ('grpc.max_send_message_length', MAX_GRPC_MESSAGE_LENGTH),
        ('grpc.max_receive_message_length', MAX_GRPC_MESSAGE_LENGTH)
    ]
    # retrieve the gRPC port from the context object
    channel = grpc.insecure_channel(f'0.0.0.0:{context.grpc_port}', options=options)
    stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
    # make a call that immediately and without blocking returns a
    # gRPC future for the asynchronous-in-the-background gRPC.
    result_future = stub.Predict.future(request, 30)  # 5 seconds
    # retrieve the output based on the model output types
    output_tensor_proto = result_future.result().outputs['predictions']
    output_shape = [dim.size for dim in output_tensor_proto.tensor_shape.dim]
    # convert bytes to numpy array
    output_np = np.array(output_tensor_proto.float_val).reshape(output_shape)
    # create JSON response
    prediction_json = {'predictions': output_np.tolist()}
    return json.dumps(prediction_json), 'application/json'
