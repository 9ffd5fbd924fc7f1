import io
import json

import numpy as np
import requests
from PIL import Image
from tensorflow.keras.preprocessing import image

HEIGHT = 224
WIDTH = 224


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

    # REST communication with TFS
    # Convert input image to json
    inst_json = json.dumps({'instances': instance.tolist()})
    print('rest call')
    # Use context object to retrieve the rest uri
    response = requests.post(context.rest_uri, data=inst_json)
    if response.status_code != 200:
        raise Exception(response.content.decode('utf-8'))
    return response.content, 'application/json'
