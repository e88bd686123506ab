"""Per-image preprocessing ops shared by the readers (ImageNet, cifar10, tfds, folder).

All randomness is stateless: every op takes a `[2]` int seed derived from (run seed, element
index), so a pipeline with a fixed seed produces the same batches however many threads run the
map, and no op keeps hidden state between runs.

Images come in as uint8 [H, W, 3] and leave as float32 [S, S, 3] with values in [0, 255] (before
`normalize`). Resizes use TF2 `tf.image.resize` (half-pixel centres) and clip to [0, 255]
(bicubic overshoots), so normalised values always lie in [-1, 1].
"""

from __future__ import annotations

import math
import tensorflow as tf

RESIZE_METHODS = ("nearest", "bilinear", "bicubic", "area")
CHANNEL_MEANS = (123.68, 116.78, 103.94)  # RGB means of ImageNet, used with --ml_perf
EVAL_SCALE_FACTOR = 1.145  # floor(224 * 1.145) = 256: the usual "resize 256, crop 224"

# The distorted-crop parameters of the Inception/ResNet ImageNet recipe (legacy values).
MIN_OBJECT_COVERED = 0.1
ASPECT_RATIO_RANGE = (0.75, 1.33)
AREA_RANGE = (0.05, 1.0)
MAX_ATTEMPTS = 100


def split_seed(seed: tf.Tensor, num: int) -> tf.Tensor:
    """[num, 2] independent seeds from one [2] seed."""
    return tf.random.experimental.stateless_split(seed, num=num)


def element_seed(run_seed, index: tf.Tensor) -> tf.Tensor:
    """The [2] seed of the element at `index` of a pipeline seeded with `run_seed` (an int, or
    a scalar tensor on a parameter-server worker)."""
    seed = tf.cast(run_seed, tf.int64) if isinstance(run_seed, tf.Tensor) \
        else tf.constant(run_seed, tf.int64)
    return tf.stack([seed, tf.cast(index, tf.int64)])


def _resize_one(image: tf.Tensor, size, method: str) -> tf.Tensor:
    out = tf.image.resize(image, size, method=method)
    return tf.clip_by_value(tf.cast(out, tf.float32), 0.0, 255.0)


def resize(image: tf.Tensor, size, method: str, position) -> tf.Tensor:
    """Resizes to `size` ([h, w]); `round_robin` picks nearest/bilinear/bicubic/area by the
    image's position in its batch, as the legacy script does."""
    if method != "round_robin":
        if method not in RESIZE_METHODS:
            raise ValueError("unknown resize method %r" % method)
        return _resize_one(image, size, method)
    branches = [lambda m=m: _resize_one(image, size, m) for m in RESIZE_METHODS]
    return tf.switch_case(tf.cast(position % len(RESIZE_METHODS), tf.int32), branches)


def central_crop(image: tf.Tensor, height: int, width: int) -> tf.Tensor:
    shape = tf.shape(image)
    top = (shape[0] - height) // 2
    left = (shape[1] - width) // 2
    out = tf.slice(image, [top, left, 0], [height, width, -1])
    out.set_shape([height, width, image.shape[-1]])
    return out


def _crop_window(image_shape: tf.Tensor, bbox: tf.Tensor, seed: tf.Tensor):
    begin, size, _ = tf.image.stateless_sample_distorted_bounding_box(
        image_shape, bounding_boxes=bbox, seed=seed,
        min_object_covered=MIN_OBJECT_COVERED, aspect_ratio_range=list(ASPECT_RATIO_RANGE),
        area_range=list(AREA_RANGE), max_attempts=MAX_ATTEMPTS,
        use_image_if_no_bounding_boxes=True)
    return begin, size


def no_boxes() -> tf.Tensor:
    """A [1, 0, 4] box tensor: sample the crop from the whole image."""
    return tf.zeros([1, 0, 4], tf.float32)


def distorted_crop_jpeg(jpeg: tf.Tensor, bbox: tf.Tensor, seed: tf.Tensor,
                        fused: bool = True) -> tf.Tensor:
    """Random crop (Inception-style distorted bounding box) of an encoded JPEG, as uint8.

    `bbox` is [1, N, 4] in [ymin, xmin, ymax, xmax] (fractions); with N = 0 the crop is sampled
    from the whole image. `fused` decodes only the crop window (decode_and_crop_jpeg).
    """
    begin, size = _crop_window(tf.image.extract_jpeg_shape(jpeg), bbox, seed)
    if fused:
        window = tf.stack([begin[0], begin[1], size[0], size[1]])
        return tf.image.decode_and_crop_jpeg(jpeg, window, channels=3)
    image = tf.io.decode_jpeg(jpeg, channels=3, dct_method="INTEGER_FAST")
    return tf.slice(image, begin, size)


def distorted_crop_image(image: tf.Tensor, bbox: tf.Tensor, seed: tf.Tensor) -> tf.Tensor:
    """The same random crop as `distorted_crop_jpeg`, of an already decoded image."""
    begin, size = _crop_window(tf.shape(image), bbox, seed)
    return tf.slice(image, begin, size)


def adjust_hsv_in_yiq(image: tf.Tensor, delta_hue: tf.Tensor,
                      scale_saturation: tf.Tensor) -> tf.Tensor:
    """Rotates hue by `delta_hue` radians and scales saturation in YIQ space.

    In YIQ the chroma is the (I, Q) plane: hue is its angle and saturation its length, so the
    change is one 2x2 linear map (the TF1 contrib op random_hsv_in_yiq, gone from TF2).
    """
    yiq = tf.image.rgb_to_yiq(image)
    cos, sin = tf.cos(delta_hue), tf.sin(delta_hue)
    i, q = yiq[..., 1], yiq[..., 2]
    i2 = scale_saturation * (cos * i - sin * q)
    q2 = scale_saturation * (sin * i + cos * q)
    return tf.image.yiq_to_rgb(tf.stack([yiq[..., 0], i2, q2], axis=-1))


def _random_hue_saturation(image, seeds, in_yiq: bool):
    if in_yiq:
        delta = tf.random.stateless_uniform([], seeds[1], -0.2 * math.pi, 0.2 * math.pi)
        scale = tf.random.stateless_uniform([], seeds[2], 0.5, 1.5)
        return adjust_hsv_in_yiq(image, delta, scale)
    image = tf.image.stateless_random_saturation(image, 0.5, 1.5, seeds[1])
    return tf.image.stateless_random_hue(image, 0.2, seeds[2])


def distort_color(image: tf.Tensor, position, seed: tf.Tensor, in_yiq: bool = True) -> tf.Tensor:
    """Colour jitter of a float image in [0, 1]: brightness 32/255, saturation 0.5-1.5, hue 0.2
    (of a full turn; in YIQ 0.2*pi radians), contrast 0.5-1.5. Even batch positions apply
    contrast last, odd ones right after brightness (the legacy fixed orders). Clipped to [0, 1].
    """
    seeds = split_seed(seed, 4)

    def brightness(x):
        return tf.image.stateless_random_brightness(x, 32.0 / 255.0, seeds[0])

    def contrast(x):
        return tf.image.stateless_random_contrast(x, 0.5, 1.5, seeds[3])

    def even():
        return contrast(_random_hue_saturation(brightness(image), seeds, in_yiq))

    def odd():
        return _random_hue_saturation(contrast(brightness(image)), seeds, in_yiq)

    out = tf.cond(tf.equal(position % 2, 0), even, odd)
    return tf.clip_by_value(out, 0.0, 1.0)


def finish_train_image(crop: tf.Tensor, size: int, seed: tf.Tensor, position,
                       resize_method: str, distortions: bool, in_yiq: bool) -> tf.Tensor:
    """Random flip, resize to size x size, optional colour jitter: float32 in [0, 255]."""
    seeds = split_seed(seed, 2)
    image = tf.image.stateless_random_flip_left_right(crop, seeds[0])
    image = resize(image, [size, size], resize_method, position)
    image.set_shape([size, size, 3])
    if distortions:
        image = distort_color(image / 255.0, position, seeds[1], in_yiq) * 255.0
    return image


def eval_image(image: tf.Tensor, size: int, resize_method: str, position) -> tf.Tensor:
    """Aspect-preserving resize so both sides are >= 1.145 * size, then a central crop."""
    shape = tf.cast(tf.shape(image)[:2], tf.float32)
    ratio = tf.maximum(size / shape[0], size / shape[1]) * EVAL_SCALE_FACTOR
    new_size = tf.cast(shape * ratio, tf.int32)
    resized = resize(image, new_size, resize_method, position)
    return central_crop(resized, size, size)


def normalize(image: tf.Tensor, ml_perf: bool = False) -> tf.Tensor:
    """[0, 255] -> [-1, 1] (x / 127.5 - 1), or with --ml_perf minus the ImageNet channel means."""
    if ml_perf:
        return image - tf.constant(CHANNEL_MEANS, image.dtype)
    return image / 127.5 - 1.0


def to_rgb(image: tf.Tensor) -> tf.Tensor:
    """Grey or RGBA images (tfds, folders) as 3-channel RGB."""
    channels = image.shape[-1]
    if channels == 1:
        return tf.image.grayscale_to_rgb(image)
    if channels == 4:
        return image[..., :3]
    return image


def boxes_from_features(ymin: tf.Tensor, xmin: tf.Tensor, ymax: tf.Tensor,
                        xmax: tf.Tensor) -> tf.Tensor:
    """Four [N] coordinate vectors as the [1, N, 4] box tensor the crop sampler expects."""
    return tf.expand_dims(tf.stack([ymin, xmin, ymax, xmax], axis=1), 0)

