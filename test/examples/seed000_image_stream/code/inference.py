import io
import cv2
import grpc
import json
import time
import pickle
import numpy as np
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2
from tensorflow_serving.apis import prediction_service_pb2_grpc

max_batch_size=10
max_image_side=512 + 5 # grpc overhead
yolov3_output_size_per_image=6 * 1024 * 1024 # ~5.3MB of output per image

MAX_GRPC_SEND_MESSAGE_LENGTH = max_batch_size * 3 * max_image_side * max_image_side * 4
MAX_GRPC_RECEIVE_MESSAGE_LENGTH = max_batch_size * yolov3_output_size_per_image

client = None
def init_client(grpc_port): # this method initializes a single instance of the client
    global client, request
    if client is not None: return
    options = [
        ('grpc.max_send_message_length', MAX_GRPC_SEND_MESSAGE_LENGTH),
        ('grpc.max_receive_message_length', MAX_GRPC_RECEIVE_MESSAGE_LENGTH)
    ]
    channel = grpc.insecure_channel(f'0.0.0.0:{grpc_port}', options=options)
    client = prediction_service_pb2_grpc.PredictionServiceStub(channel)
    
    request = predict_pb2.PredictRequest()
    request.model_spec.name = 'detector'# this is the same name of the root dir in your model.tar.gz
    request.model_spec.signature_name = 'serving_default'
    print('Client initialized')

def predict(payload):
    global client, request
    
    request.inputs['images'].Clear()
    request.inputs['images'].CopyFrom(tf.make_tensor_proto(payload))
    # invoke the model
    prediction = client.Predict(request, 25)
    # get the predictions
    result = []
    for o in [ 'output_0', 'output_1', 'output_2' ]:
        result.append( tf.make_ndarray(prediction.outputs[o]) )
    
    # ATTENTION: you need to post-process the network output first!
    # reference: https://github.com/qqwweee/keras-yolo3/blob/master/yolo.py
    
    # this is just a quick-n-dirty way to return all raw values in NPY format
    result = np.concatenate([i.flatten() for i in result])
    return result

# customizing the request handler
# More info: https://sagemaker.readthedocs.io/en/stable/frameworks/tensorflow/deploying_tensorflow_serving.html
def handler(data, context):
    if context.request_content_type != 'application/octet-stream':
        raise ValueError(f'Unsupported content type: {context.request_content_type or "unknown"}')
    if context.accept_header != 'application/x-npy':
        raise ValueError(f'Unsupported accept type: {context.accept_header or "unknown"}')
    
    init_client(context.grpc_port)
    
    # iterate through all the images and create a batch
    data_len = int.from_bytes(data.read(4), 'big')
    payload = []
    while data_len > 0:
        imgread_start_time = time.time()
        img = np.frombuffer(data.read(data_len), dtype=np.uint8)
        img = cv2.imdecode(img, cv2.IMREAD_COLOR)
        img = cv2.cvtColor(img, cv2.COLOR_BGR2RGB) # convert from BGR to RGB
        img = img.astype(np.float32) / 255. # normalize
        img = np.expand_dims(img, axis=0) # put in NHWC format
        payload.append(img)
        data_len = int.from_bytes(data.read(4), 'big')
    if len(payload) == 0: raise ValueError('Empty input data!')
    
    # invoke the model
    result = predict(np.vstack(payload))
    
    # pickle the resulting tensor and return it as NPY
    buffer = io.BytesIO()
    pickle.dump(result, buffer)
    buffer.seek(0)

    return buffer.read(), context.accept_header
