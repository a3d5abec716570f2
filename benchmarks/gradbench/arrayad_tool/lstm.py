"""lstm: the loss of a ``l``-layer LSTM predicting each character (a vector of ``b`` bits) of a
sequence from the one before it, and its gradient with respect to ``main_params`` and
``extra_params``, flattened row by row and concatenated.

``main_params`` rows ``2i`` and ``2i + 1`` are layer ``i``'s weights and biases, each the four
gates (forget, input, output, change) of ``b`` entries; the weights multiply elementwise, not as
a matrix. ``extra_params`` rows are the input weight, the output weight and the output bias;
``state`` rows ``2i`` and ``2i + 1`` are layer ``i``'s hidden and cell state.
"""

import numpy as np

import arrayad as ad
from arrayad.func import grad, scan

from . import Entry, as_float


def objective(main_params, extra_params, state, sequence):
    layers = main_params.shape[0] // 2
    c, b = sequence.shape
    weights = ad.reshape(main_params[0::2], (layers, 4, b))
    biases = ad.reshape(main_params[1::2], (layers, 4, b))

    def step(carry, characters):
        hidden, cell = carry  # (layers, b) each
        current, following = characters
        layer_input = current * extra_params[0]
        new_hidden, new_cell = [], []
        for i in range(layers):
            w, bias = weights[i], biases[i]
            forget = ad.sigmoid(layer_input * w[0] + bias[0])
            ingate = ad.sigmoid(hidden[i] * w[1] + bias[1])
            outgate = ad.sigmoid(layer_input * w[2] + bias[2])
            change = ad.tanh(hidden[i] * w[3] + bias[3])
            cell_i = cell[i] * forget + ingate * change
            hidden_i = outgate * ad.tanh(cell_i)
            new_hidden.append(hidden_i)
            new_cell.append(cell_i)
            layer_input = hidden_i
        prediction = layer_input * extra_params[1] + extra_params[2]
        # NOTE [lstm's + 2]: the eval's definition (ADBench's) normalises with
        # log(2 + sum(exp(prediction))), not a plain log-sum-exp; the golden tool does the same.
        normalised = prediction - ad.log(2 + ad.sum(ad.exp(prediction)))
        return (ad.stack(new_hidden), ad.stack(new_cell)), ad.sum(following * normalised)

    _, terms = scan(step, (state[0::2], state[1::2]), (sequence[:-1], sequence[1:]))
    return -ad.sum(terms) / ((c - 1) * b)


def jacobian(main_params, extra_params, state, sequence):
    d_main, d_extra = grad(objective, argnums=(0, 1))(main_params, extra_params, state, sequence)
    return ad.concat([ad.reshape(d_main, (-1,)), ad.reshape(d_extra, (-1,))])


def prepare(input):
    return tuple(
        np.asarray(input[name], dtype=np.float64)
        for name in ("main_params", "extra_params", "state", "sequence")
    )


FUNCTIONS = {
    "objective": Entry(prepare, objective, as_float),
    "jacobian": Entry(prepare, jacobian, lambda g: np.asarray(g).tolist()),
}
