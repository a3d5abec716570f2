"""The GradBench tool in benchmarks/gradbench/arrayad_tool: every eval module's functions and
derivatives at small sizes, and the protocol runner on a scripted exchange.

The references are independent of the modules: primal values from plain NumPy loops written from
each eval's definition, derivatives from central differences of those references (float64), and,
where JAX is installed, from jax.grad of the same NumPy-style definition. No GradBench checkout is
needed.
"""
import importlib.util
import io
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

import arrayad as ad
from reference import fd_grad

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks" / "gradbench"))

from arrayad_tool import EVALS, descent, det, gmm, hello, kmeans, llsq, lse, lstm, ode  # noqa: E402
from arrayad_tool import ba, particle, saddle  # noqa: E402
from arrayad_tool.__main__ import main as run_tool  # noqa: E402

HAS_JAX = importlib.util.find_spec("jax") is not None


def close(actual, expected, rtol=1e-6, atol=1e-8):
    np.testing.assert_allclose(np.asarray(actual, dtype=np.float64), expected, rtol=rtol,
                               atol=atol)


@pytest.fixture(params=[False, True], ids=["eager", "jit"])
def compiled(request):
    """``compiled(entry)`` is the entry's compute, under ``arrayad.jit`` in the jit case."""
    if request.param:
        return lambda entry: ad.jit(entry.compute, static_argnums=entry.static_argnums)
    return lambda entry: entry.compute


# --- plain NumPy references, written from the evals' definitions -----------------------------

def lse_reference(x):
    return math.log(sum(math.exp(v) for v in x))


def gmm_reference(alpha, mu, q, l, x, m, gamma):
    """The log-posterior from its definition: mixture densities and Wishart densities, each
    precision matrix built entry by entry."""
    k, d = q.shape
    n = x.shape[0]
    weights = np.exp(alpha) / np.sum(np.exp(alpha))
    precisions = []
    for c in range(k):
        Q = np.zeros((d, d))
        position = 0
        for j in range(d):
            Q[j, j] = math.exp(q[c, j])
            for i in range(j + 1, d):
                Q[i, j] = l[c, position]
                position += 1
        precisions.append(Q.T @ Q)
    log_likelihood = 0.0
    for i in range(n):
        density = 0.0
        for c in range(k):
            r = x[i] - mu[c]
            density += weights[c] * math.exp(-0.5 * r @ precisions[c] @ r) / math.sqrt(
                (2 * math.pi) ** d / np.linalg.det(precisions[c]))
        log_likelihood += math.log(density)
    dof = d + m + 1
    V = np.eye(d) / gamma**2
    log_prior = 0.0
    for c in range(k):
        P = precisions[c]
        log_gamma_d = d * (d - 1) / 4 * math.log(math.pi) + sum(
            math.lgamma(dof / 2 + (1 - j) / 2) for j in range(1, d + 1))
        log_prior += ((dof - d - 1) / 2 * math.log(np.linalg.det(P))
                      - np.trace(np.linalg.inv(V) @ P) / 2 - dof * d / 2 * math.log(2)
                      - dof / 2 * math.log(np.linalg.det(V)) - log_gamma_d)
    return log_likelihood + log_prior


def kmeans_reference(points, centroids):
    return sum(min(float(np.sum((p - c) ** 2)) for c in centroids) for p in points)


def ode_reference(x, s):
    def f(y):
        z = np.empty_like(y)
        z[0] = x[0]
        for i in range(1, len(y)):
            z[i] = x[i] * y[i - 1]
        return z

    y, h = np.zeros_like(x), 2.0 / s
    for _ in range(s):
        k1 = f(y)
        k2 = f(y + h * k1 / 2)
        k3 = f(y + h * k2 / 2)
        k4 = f(y + h * k3)
        y = y + h * (k1 + 2 * k2 + 2 * k3 + k4) / 6
    return y


def llsq_reference(x, n):
    total = 0.0
    for i in range(n):
        t = -1 + 2 * i / (n - 1)
        total += (np.sign(t) - sum(x[j] * t**j for j in range(len(x)))) ** 2
    return total / 2


def lstm_reference(main_params, extra_params, state, sequence):
    layers, b = main_params.shape[0] // 2, sequence.shape[1]
    state = state.copy()
    sigmoid = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    total = 0.0
    for t in range(len(sequence) - 1):
        layer_input = sequence[t] * extra_params[0]
        for i in range(layers):
            w, bias = main_params[2 * i], main_params[2 * i + 1]
            hidden, cell = state[2 * i], state[2 * i + 1]
            gate = lambda g, v: v * w[g * b:(g + 1) * b] + bias[g * b:(g + 1) * b]  # noqa: E731
            cell = cell * sigmoid(gate(0, layer_input)) + sigmoid(gate(1, hidden)) * np.tanh(
                gate(3, hidden))
            hidden = sigmoid(gate(2, layer_input)) * np.tanh(cell)
            state[2 * i], state[2 * i + 1] = hidden, cell
            layer_input = hidden
        prediction = layer_input * extra_params[1] + extra_params[2]
        total += np.sum(sequence[t + 1] * (prediction - np.log(2 + np.sum(np.exp(prediction)))))
    return -total / ((len(sequence) - 1) * b)


# --- the modules against the references -----------------------------------------------------

def test_hello(compiled):
    x = np.float64(3.0)
    close(compiled(hello.FUNCTIONS["square"])(x), 9.0)
    close(compiled(hello.FUNCTIONS["double"])(x), 6.0)


def test_lse(compiled):
    x = np.random.default_rng(0).uniform(-5, 5, 7)
    close(compiled(lse.FUNCTIONS["primal"])(x), lse_reference(x))
    close(compiled(lse.FUNCTIONS["gradient"])(x), fd_grad(lse_reference, x))


def gmm_input(d=3, k=2, n=4):
    rng = np.random.default_rng(1)
    return {"d": d, "k": k, "n": n, "x": rng.normal(size=(n, d)).tolist(), "m": 1,
            "gamma": 1.5, "alpha": rng.normal(size=k).tolist(),
            "mu": rng.uniform(size=(k, d)).tolist(), "q": rng.normal(size=(k, d)).tolist(),
            "l": rng.normal(size=(k, d * (d - 1) // 2)).tolist()}


def test_gmm(compiled):
    args = gmm.prepare(gmm_input())
    close(compiled(gmm.FUNCTIONS["objective"])(*args), gmm_reference(*args))
    gradients = compiled(gmm.FUNCTIONS["jacobian"])(*args)
    for position, gradient in enumerate(gradients):
        def along(value, position=position):
            moved = list(args)
            moved[position] = value
            return gmm_reference(*moved)
        close(gradient, fd_grad(along, args[position]), rtol=1e-5, atol=1e-6)
    output = gmm.FUNCTIONS["jacobian"].post(gradients)
    assert sorted(output) == ["alpha", "l", "mu", "q"]
    assert np.shape(output["l"]) == (2, 3)


def test_gmm_one_dimension_has_no_l():
    args = gmm.prepare(gmm_input(d=1, k=2, n=3))
    assert args[3].shape == (2, 0)
    close(gmm.objective(*args), gmm_reference(*args))


def test_kmeans(compiled):
    rng = np.random.default_rng(2)
    points = rng.random((12, 3))
    centroids = points[-4:] + 0.01  # every centroid nearest to at least one point
    close(compiled(kmeans.FUNCTIONS["cost"])(points, centroids),
          kmeans_reference(points, centroids))
    gradient = fd_grad(lambda c: kmeans_reference(points, c), centroids)
    # The Hessian is diagonal: 2 x (points nearest to the centroid), the same for each coordinate.
    nearest = np.argmin(((points[:, None, :] - centroids[None]) ** 2).sum(-1), axis=1)
    hessian_diagonal = 2.0 * np.bincount(nearest, minlength=4)[:, None]
    close(compiled(kmeans.FUNCTIONS["dir"])(points, centroids), gradient / hessian_diagonal,
          rtol=1e-6, atol=1e-7)


def test_ode(compiled):
    x, s = np.random.default_rng(3).random(6), 4
    close(compiled(ode.FUNCTIONS["primal"])(x, s), ode_reference(x, s))
    close(compiled(ode.FUNCTIONS["gradient"])(x, s),
          fd_grad(lambda v: ode_reference(v, s)[-1], x))


def test_llsq(compiled):
    x, n = np.random.default_rng(4).random(5), 9
    close(compiled(llsq.FUNCTIONS["primal"])(x, n), llsq_reference(x, n))
    close(compiled(llsq.FUNCTIONS["gradient"])(x, n),
          fd_grad(lambda v: llsq_reference(v, n), x), rtol=1e-6, atol=1e-6)


def lstm_input(layers=2, b=3, c=5):
    rng = np.random.default_rng(5)
    return {"main_params": rng.random((2 * layers, 4 * b)).tolist(),
            "extra_params": rng.random((3, b)).tolist(),
            "state": rng.random((2 * layers, b)).tolist(),
            "sequence": rng.integers(0, 2, (c, b)).astype(float).tolist()}


def test_lstm(compiled):
    args = lstm.prepare(lstm_input())
    close(compiled(lstm.FUNCTIONS["objective"])(*args), lstm_reference(*args))
    expected = np.concatenate([
        fd_grad(lambda v: lstm_reference(v, *args[1:]), args[0]).ravel(),
        fd_grad(lambda v: lstm_reference(args[0], v, *args[2:]), args[1]).ravel()])
    close(compiled(lstm.FUNCTIONS["jacobian"])(*args), expected, rtol=1e-5, atol=1e-8)


def test_det(compiled):
    A, ell = np.random.default_rng(6).random(9), 3
    reference = lambda a: np.linalg.det(a.reshape(ell, ell))  # noqa: E731
    close(compiled(det.FUNCTIONS["primal"])(A, ell), reference(A))
    close(compiled(det.FUNCTIONS["gradient"])(A, ell), fd_grad(reference, A))


def plain_argmin(gradient, f, x):
    """The evals' gradient-descent solver on Python floats, with a hand-written gradient."""
    fx, gx, eta, successes = f(x), gradient(x), 1e-5, 0
    while True:
        if math.hypot(*gx) <= 1e-5:
            return x
        if successes == 10:
            eta, successes = 2 * eta, 0
            continue
        x_next = [a - eta * b for a, b in zip(x, gx)]
        if math.hypot(*[a - b for a, b in zip(x, x_next)]) <= 1e-5:
            return x
        f_next = f(x_next)
        if f_next < fx:
            x, fx, gx, successes = x_next, f_next, gradient(x_next), successes + 1
        else:
            eta, successes = eta / 2, 0


@pytest.mark.parametrize("modes", ["rr", "ff", "fr", "rf"])
def test_saddle_nested_descent(modes):
    """From a start near the saddle (the eval's start takes seconds), every mode pair takes the
    plain solver's path: argmin of the inner maximum, then the argmax."""
    start = [0.004, 0.003]

    def objective(p1, p2):
        return (p1[0] * p1[0] + p1[1] * p1[1]) - (p2[0] * p2[0] + p2[1] * p2[1])

    def inner_maximum(p1):
        return objective(p1, plain_argmin(lambda p: [2 * v for v in p],
                                          lambda p: -objective(p1, p), start))

    # d/dp1 of the inner maximum: the solver's path does not depend on p1 (the objective
    # separates), so it is the partial derivative, 2 p1.
    r1 = plain_argmin(lambda p: [2 * v for v in p], inner_maximum, start)
    r2 = plain_argmin(lambda p: [2 * v for v in p], lambda p: -objective(r1, p), start)
    close(saddle.FUNCTIONS[modes].compute(np.asarray(start)), r1 + r2, rtol=1e-12, atol=0)


def plain_landing(w):
    charges = [(10.0, 10.0 - w), (10.0, 0.0)]
    x, v, dt = [0.0, 8.0], [0.75, 0.0], 0.1
    while True:
        force = [0.0, 0.0]
        for cx, cy in charges:  # gradient of 1 / |x - c|
            r = math.hypot(x[0] - cx, x[1] - cy)
            force[0] -= (x[0] - cx) / r**3
            force[1] -= (x[1] - cy) / r**3
        x_next = [x[0] + dt * v[0], x[1] + dt * v[1]]
        if x_next[1] < 0:
            break
        x, v = x_next, [v[0] - dt * force[0], v[1] - dt * force[1]]
    landing = x[0] - x[1] / v[1] * v[0]
    return landing * landing


@pytest.mark.parametrize("outer, inner", [("r", "f"), ("f", "r")])
def test_particle_simulation_and_its_derivative(outer, inner):
    """The simulation with either inner mode, differentiated by the other outer mode."""
    from arrayad.func import grad, jacfwd
    w = np.float64(0.3)
    gradient_of = descent.GRADIENTS[inner]
    close(particle.landing_distance_squared(w, gradient_of), plain_landing(0.3), rtol=1e-12)
    slope = (plain_landing(0.3 + 1e-6) - plain_landing(0.3 - 1e-6)) / 2e-6
    differentiate = {"r": grad, "f": jacfwd}[outer]
    close(differentiate(lambda v: particle.landing_distance_squared(v, gradient_of))(w), slope,
          rtol=1e-6)


def test_descent_follows_the_plain_solver():
    target = [3.0, -2.0]
    f = lambda v: ad.sum((v - np.asarray(target)) ** 2)  # noqa: E731
    expected = plain_argmin(lambda v: [2 * (a - b) for a, b in zip(v, target)],
                            lambda v: sum((a - b) ** 2 for a, b in zip(v, target)), [0.0, 0.0])
    assert math.dist(expected, target) < 1e-2  # the solver stops on a step shorter than 1e-5
    for gradient_of in descent.GRADIENTS.values():
        close(descent.argmin(gradient_of, f, np.zeros(2)), expected, rtol=1e-12, atol=0)


@pytest.mark.parametrize("modes", ["rf", "fr"])
def test_jit_stages_the_solvers_and_their_derivatives(modes):
    """``--jit`` stages the solvers written as while_loops: the staged particle and saddle
    functions (the outer derivative through the simulation's loop, or through the inner
    solver's) give the eager Python loops' answers, from starts that converge in few steps."""
    from arrayad.func import grad, jacfwd
    outer, inner = ({"r": grad, "f": jacfwd}[modes[0]], descent.GRADIENTS[modes[1]])
    w = np.float64(0.3)
    slope = ad.jit(outer(lambda v: particle.landing_distance_squared(v, inner, staged=True)))
    close(slope(w), outer(lambda v: particle.landing_distance_squared(v, inner))(w),
          rtol=1e-12, atol=0)
    entry = particle.FUNCTIONS[modes]
    close(ad.jit(entry.staged)(np.asarray([0.21])), entry.compute(np.asarray([0.21])),
          rtol=1e-12, atol=0)
    start = np.asarray([0.004, 0.003])
    entry = saddle.FUNCTIONS[modes]
    close(ad.jit(entry.staged)(start), entry.compute(start), rtol=1e-12, atol=0)
    for g in descent.GRADIENTS.values():
        close(descent.staged_argmin(g, lambda v: ad.sum((v - 3.0) ** 2), np.zeros(2)),
              descent.argmin(g, lambda v: ad.sum((v - 3.0) ** 2), np.zeros(2)), rtol=1e-12)


def ba_residuals_reference(cameras, points, weights, features, camera_of, point_of):
    """All 3p residuals, with the rotation as a matrix (I + sin K + (1 - cos) K^2)."""
    errors = []
    for i in range(len(weights)):
        camera, point = cameras[camera_of[i]], points[point_of[i]]
        angle = np.linalg.norm(camera[:3])
        a = camera[:3] / angle
        K = np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])
        R = np.eye(3) + math.sin(angle) * K + (1 - math.cos(angle)) * K @ K
        seen = R @ (point - camera[3:6])
        projected = seen[:2] / seen[2]
        r2 = projected @ projected
        pixel = projected * (1 + camera[9] * r2 + camera[10] * r2 * r2) * camera[6] + camera[7:9]
        errors.append(weights[i] * (pixel - features[i]))
    return np.concatenate([np.ravel(errors), 1 - weights**2])


def test_ba(compiled):
    rng = np.random.default_rng(11)
    inputs = {"n": 2, "m": 3, "p": 4, "cam": (rng.normal(size=11) * 0.3 + [0, 0, 0, 0, 0, -5,
              400, 5, -8, 0.1, 0.01]).tolist(), "x": rng.normal(size=3).tolist(), "w": 0.7,
              "feat": [3.0, -2.0]}
    args = ba.prepare(inputs)
    # Perturb the copies so that the test sees which copy each entry belongs to.
    args = (args[0] + rng.normal(size=args[0].shape) * 0.01, args[1] + rng.normal(size=(3, 3)),
            args[2] + rng.normal(size=4) * 0.1) + args[3:]
    errors, weight_errors = compiled(ba.FUNCTIONS["objective"])(*args)
    expected = ba_residuals_reference(*args)
    close(np.concatenate([np.ravel(errors), weight_errors]), expected)
    rows, columns, values = compiled(ba.FUNCTIONS["jacobian"])(*args)
    dense = np.zeros((12, 11 * 2 + 3 * 3 + 4))
    for row in range(12):
        for k in range(rows[row], rows[row + 1]):
            dense[row, columns[k]] += values[k]
    parameters = np.concatenate([args[0].ravel(), args[1].ravel(), args[2]])

    def residual(theta, j):
        return ba_residuals_reference(theta[:22].reshape(2, 11), theta[22:31].reshape(3, 3),
                                      theta[31:], *args[3:])[j]
    for j in range(12):
        close(dense[j], fd_grad(lambda theta: residual(theta, j), parameters),
              rtol=1e-5, atol=1e-5)
    assert len(rows) == 3 * 4 + 1 and len(columns) == len(values) == 2 * 15 * 4 + 4
    output = ba.FUNCTIONS["jacobian"].post((rows, columns, values))
    assert output["vals"][-1] == values[-1] and len(output["cols"]) == 31


@pytest.mark.skipif(not HAS_JAX, reason="JAX is not installed")
def test_gradients_agree_with_jax():
    """A second, independent derivative for the evals whose references JAX can trace."""
    import jax
    import jax.numpy as jnp
    with jax.enable_x64(True):
        x = np.random.default_rng(7).uniform(-3, 3, 9)
        close(lse.gradient(x), jax.grad(lambda v: jax.nn.logsumexp(v))(x), rtol=1e-12)

        coefficients, n = np.random.default_rng(8).random(4), 11
        t = np.linspace(-1, 1, n)
        powers = np.vander(t, 4, increasing=True)
        jax_llsq = lambda v: jnp.sum((np.sign(t) - powers @ v) ** 2) / 2  # noqa: E731
        close(llsq.gradient(coefficients, n), jax.grad(jax_llsq)(coefficients), rtol=1e-10)

        A = np.random.default_rng(9).random(16)
        close(det.gradient(A, 4), jax.grad(lambda a: jnp.linalg.det(a.reshape(4, 4)))(A),
              rtol=1e-10)


@pytest.mark.parametrize("backend_name", ["array_api_strict", "torch"])
def test_modules_run_on_other_backends(backend_name):
    """The modules are array API code: the same derivatives on other backends' arrays."""
    pytest.importorskip(backend_name)
    convert = ad.get_backend(backend_name).xp.asarray
    x = np.random.default_rng(10).random(6)
    close(np.asarray(ode.gradient(convert(x), 3)), ode.gradient(x, 3))
    args = gmm.prepare(gmm_input())
    moved = [convert(a) if isinstance(a, np.ndarray) else a for a in args]
    for ours, theirs in zip(gmm.jacobian(*moved), gmm.jacobian(*args)):
        close(np.asarray(ours), theirs, rtol=1e-12)


# --- the protocol runner ----------------------------------------------------------------------

def exchange(messages, argv=()):
    stdout = io.StringIO()
    run_tool(list(argv), stdin=io.StringIO("".join(json.dumps(m) + "\n" for m in messages)),
             stdout=stdout)
    return [json.loads(line) for line in stdout.getvalue().splitlines()]


@pytest.mark.parametrize("argv", [(), ("--jit",)])
def test_runner_answers_a_session(argv):
    x = [0.5, -1.0, 2.0]
    responses = exchange([
        {"id": 0, "kind": "start", "eval": "lse"},
        {"id": 1, "kind": "define", "module": "lse"},
        {"id": 2, "kind": "evaluate", "module": "lse", "function": "gradient",
         "input": {"x": x, "min_runs": 3, "min_seconds": 0}},
        {"id": 3, "kind": "analysis", "of": 2, "valid": True},
        {"id": 4, "kind": "evaluate", "module": "lse", "function": "primal",
         "input": {"x": x, "min_runs": 1, "min_seconds": 0}, "description": "n=3"},
    ], argv)
    assert [r["id"] for r in responses] == [0, 1, 2, 3, 4]
    assert responses[0] == {"id": 0, "tool": "arrayad-jit" if argv else "arrayad"}
    assert responses[1] == {"id": 1, "success": True}
    assert responses[3] == {"id": 3}
    gradient = responses[2]
    assert gradient["success"] is True
    close(gradient["output"], fd_grad(lse_reference, np.array(x)))
    assert len(gradient["timings"]) == 3
    assert all(t["name"] == "evaluate" and t["nanoseconds"] > 0 for t in gradient["timings"])
    assert isinstance(responses[4]["output"], float)
    close(responses[4]["output"], lse_reference(x))


def test_runner_hello_and_failures():
    responses = exchange([
        {"id": 0, "kind": "start"},
        {"id": 1, "kind": "define", "module": "hello"},
        {"id": 2, "kind": "evaluate", "module": "hello", "function": "double", "input": 4.0},
        {"id": 3, "kind": "define", "module": "no-such-eval"},
        {"id": 4, "kind": "evaluate", "module": "hello", "function": "square", "input": "x"},
    ])
    assert responses[2]["output"] == 8.0 and len(responses[2]["timings"]) == 1
    assert responses[3]["success"] is False and "no-such-eval" in responses[3]["error"]
    assert responses[4]["id"] == 4 and responses[4]["success"] is False
    assert "error" in responses[4]


def test_every_listed_eval_has_a_module():
    for name in EVALS:
        module = importlib.import_module(f"arrayad_tool.{name}")
        assert module.FUNCTIONS, name
