"""Unmodified third-party array-API calls to differentiate: the cases of the third-party matrix.

Each ``Case`` is a small function of one or two float64 arrays built from one public call of SciPy
(special, stats, signal, fft, integrate, interpolate and a few others), scikit-learn (metrics,
pairwise kernels, preprocessing, with ``array_api_dispatch=True``), array-api-extra or einops, with
inputs inside the call's domain. The function is written the way array-API code is written: it
takes arrays, lets the library pick the namespace from them, and builds any constant with the
namespace of its input (``_const``), so the same case runs under arrayad (NumPy, array-api-strict
and torch inputs), torch.func on torch tensors and JAX on JAX arrays.

The second half of the module is the harness shared by ``tests/test_third_party.py`` and
``tools/third_party_matrix.py``: ``run(case, transform, library, backend)`` applies grad (of a
scalar reduction of the output), jvp or vmap (over a leading batch of 3) and classifies the
outcome as ``ok``, ``raises`` (with the exception) or ``WRONG`` (a value that disagrees with
central finite differences / a Python loop, both computed by the library itself on plain NumPy
arrays, never by arrayad).
"""
import os

# SciPy reads this once, at import: its array API support must be on before the first import.
os.environ.setdefault("SCIPY_ARRAY_API", "1")

import contextlib
import dataclasses
import functools
import warnings
import zlib

import numpy as np
from array_api_compat import array_namespace, device as _device

__all__ = ["CASES", "CASES_BY_ID", "Case", "FAMILIES", "TRANSFORMS", "ARRAYAD_BACKENDS",
           "LIBRARIES", "Outcome", "run", "reference"]


@dataclasses.dataclass(frozen=True)
class Case:
    id: str                 # "family.call[variant]", unique
    family: str             # e.g. "scipy.special"
    fn: object              # f(*arrays) -> array
    shapes: tuple           # one shape per argument
    domains: tuple          # one (low, high) per argument

    @property
    def nargs(self):
        return len(self.shapes)

    def inputs(self, batch=None):
        """The case's float64 NumPy inputs (``batch``: a leading axis of that size), seeded by the
        case id so that every run of every library sees the same numbers."""
        rng = np.random.default_rng(zlib.crc32(self.id.encode()) + (batch or 0))
        lead = () if batch is None else (batch,)
        return tuple(rng.uniform(lo, hi, lead + tuple(s))
                     for s, (lo, hi) in zip(self.shapes, self.domains))

    def directions(self):
        rng = np.random.default_rng(zlib.crc32(self.id.encode()) + 1000)
        return tuple(rng.standard_normal(tuple(s)) for s in self.shapes)


CASES = []


def case(id, family, fn, shapes=((5,),), domains=((-1.0, 1.0),)):
    if len(domains) < len(shapes):
        domains = tuple(domains) * len(shapes)
    if any(c.id == id for c in CASES):
        raise ValueError(f"third_party_cases: duplicate case id {id!r}")
    CASES.append(Case(id, family, fn, tuple(shapes), tuple(domains)))


# ---------------------------------------------------------------------------------------------
# Helpers the case functions use (array-API style: the namespace comes from the arrays)

def _const(like, values):
    """``values`` as an array of ``like``'s namespace, dtype and device (a constant of the case)."""
    xp = array_namespace(like)
    return xp.asarray(values, dtype=like.dtype, device=_device(like))


def _ri(z):
    """A complex result as one real array: its real and imaginary parts side by side."""
    xp = array_namespace(z)
    return xp.concat([xp.real(z), xp.imag(z)], axis=-1)


@contextlib.contextmanager
def _sk():
    import sklearn
    with sklearn.config_context(array_api_dispatch=True):
        yield


def _sklearn(call):
    """Run a scikit-learn call with ``array_api_dispatch=True`` (thread-local, undone after)."""
    @functools.wraps(call)
    def wrapper(*args):
        with _sk():
            return call(*args)
    return wrapper


POS = (0.5, 2.5)        # a domain inside (0, inf)
UNIT = (0.15, 0.85)     # inside (0, 1)
SYM = (-1.5, 1.5)
V, M, M2 = (6,), (3, 4), (4, 3)   # vector, matrix, a second matrix for kernels (same columns)


# ---------------------------------------------------------------------------------------------
# scipy.special (elementwise: dispatched to ``xp.special`` or a generic implementation)

def _special():
    import scipy.special as sp
    fam = "scipy.special"
    one = {
        "erf": SYM, "erfc": SYM, "erfcx": (-0.5, 2.0), "erfinv": (-0.8, 0.8), "expit": (-3, 3),
        "logit": UNIT, "ndtr": SYM, "ndtri": UNIT, "log_ndtr": SYM, "gammaln": POS,
        "gamma": POS, "rgamma": POS, "loggamma": POS, "psi": POS, "entr": POS, "i0": SYM,
        "i0e": SYM, "i1": SYM, "i1e": SYM, "k0": POS, "k0e": POS, "k1": POS, "k1e": POS,
        "j0": SYM, "j1": SYM, "y0": POS, "y1": POS, "exp1": POS, "expi": POS, "exp2": SYM,
        "exp10": SYM, "cosm1": SYM, "cbrt": POS, "sinc": SYM, "cosdg": (-80, 80),
        "sindg": (-80, 80), "tandg": (-40, 40), "cotdg": (10, 80), "ellipk": UNIT,
        "ellipkm1": UNIT, "spence": POS, "zetac": (1.5, 4.0), "exprel": SYM,
    }
    for name, dom in one.items():
        case(f"special.{name}", fam, getattr(sp, name), (V,), (dom,))
    two = {
        "xlogy": (POS, POS), "xlog1py": (POS, POS), "rel_entr": (POS, POS), "kl_div": (POS, POS),
        "huber": (POS, SYM), "pseudo_huber": (POS, SYM), "gammainc": (POS, POS),
        "gammaincc": (POS, POS), "betaln": (POS, POS), "poch": (POS, POS), "boxcox": (POS, SYM),
        "boxcox1p": (POS, SYM), "inv_boxcox": ((0.1, 0.5), SYM), "chdtr": ((1, 4), POS),
        "chdtrc": ((1, 4), POS), "stdtr": ((1, 5), SYM), "zeta": ((1.5, 4), POS),
        "gammaincinv": (POS, UNIT), "binom": ((3, 5), (0.5, 2.5)),
    }
    for name, doms in two.items():
        case(f"special.{name}", fam, getattr(sp, name), (V, V), doms)
    case("special.betainc[b=2.5]", fam, lambda a, x: sp.betainc(a, 2.5, x), (V, V), (POS, UNIT))
    case("special.betaincc[b=2.5]", fam, lambda a, x: sp.betaincc(a, 2.5, x), (V, V), (POS, UNIT))
    case("special.gdtr[b=2]", fam, lambda a, x: sp.gdtr(a, 2.0, x), (V, V), (POS, POS))
    case("special.fdtr[dfd=3]", fam, lambda d, x: sp.fdtr(d, 3.0, x), (V, V), ((1, 4), POS))
    case("special.hyp1f1[b=2]", fam, lambda a, x: sp.hyp1f1(a, 2.0, x), (V, V), (POS, SYM))
    case("special.polygamma[n=1]", fam, lambda x: sp.polygamma(1, x), (V,), (POS,))
    case("special.expn[n=2]", fam, lambda x: sp.expn(2, x), (V,), (POS,))
    case("special.yn[n=1]", fam, lambda x: sp.yn(1, x), (V,), (POS,))
    case("special.multigammaln[d=3]", fam, lambda a: sp.multigammaln(a, 3), ((),), ((2.0, 4.0),))
    case("special.logsumexp", fam, sp.logsumexp, (V,), (SYM,))
    case("special.logsumexp[axis=-1]", fam, lambda x: sp.logsumexp(x, axis=-1), (M,), (SYM,))
    case("special.logsumexp[b]", fam, lambda x, b: sp.logsumexp(x, b=b), (V, V), (SYM, POS))
    case("special.softmax", fam, lambda x: sp.softmax(x, axis=-1), (M,), (SYM,))
    case("special.log_softmax", fam, lambda x: sp.log_softmax(x, axis=-1), (M,), (SYM,))


# ---------------------------------------------------------------------------------------------
# scipy.stats

def _stats():
    import scipy.stats as st
    fam = "scipy.stats"
    one = {
        "moment[order=3]": (lambda x: st.moment(x, order=3), SYM),
        "skew": (st.skew, SYM), "kurtosis": (st.kurtosis, SYM), "zscore": (st.zscore, SYM),
        "gzscore": (st.gzscore, POS), "gmean": (st.gmean, POS), "hmean": (st.hmean, POS),
        "pmean[p=1.5]": (lambda x: st.pmean(x, 1.5), POS), "variation": (st.variation, POS),
        "sem": (st.sem, SYM), "tmean": (st.tmean, SYM), "tvar": (st.tvar, SYM),
        "tstd": (st.tstd, SYM), "tsem": (st.tsem, SYM), "tmin": (st.tmin, SYM),
        "tmax": (st.tmax, SYM), "trim_mean[0.2]": (lambda x: st.trim_mean(x, 0.2), SYM),
        "iqr": (st.iqr, SYM), "circmean": (st.circmean, SYM), "circvar": (st.circvar, SYM),
        "circstd": (st.circstd, SYM), "entropy": (st.entropy, POS), "gstd": (st.gstd, POS),
        "kstat[n=2]": (lambda x: st.kstat(x, 2), SYM), "kstatvar": (st.kstatvar, SYM),
        "median_abs_deviation": (st.median_abs_deviation, SYM),
        "describe.variance": (lambda x: st.describe(x).variance, SYM),
        "jarque_bera": (lambda x: st.jarque_bera(x).statistic, SYM),
        "ttest_1samp": (lambda x: st.ttest_1samp(x, 0.2).statistic, SYM),
        "chisquare": (lambda x: st.chisquare(x).statistic, POS),
        "power_divergence": (lambda x: st.power_divergence(x, lambda_="cressie-read").statistic,
                             POS),
        "boxcox_llf[1.5]": (lambda x: st.boxcox_llf(1.5, x), POS),
        "yeojohnson_llf[0.5]": (lambda x: st.yeojohnson_llf(0.5, x), SYM),
        "combine_pvalues": (lambda x: st.combine_pvalues(x).statistic, UNIT),
        "quantile[0.3]": (lambda x: st.quantile(x, 0.3), SYM),
        "lmoment": (st.lmoment, SYM),
    }
    for name, (fn, dom) in one.items():
        case(f"stats.{name}", fam, fn, (V,), (dom,))
    n8 = (9,)   # the normality tests need at least 8 observations
    case("stats.differential_entropy", fam, st.differential_entropy, (n8,), (SYM,))
    case("stats.skewtest", fam, lambda x: st.skewtest(x).statistic, (n8,), (SYM,))
    case("stats.kurtosistest", fam, lambda x: st.kurtosistest(x).statistic, (n8,), (SYM,))
    case("stats.normaltest", fam, lambda x: st.normaltest(x).statistic, (n8,), (SYM,))
    case("stats.skew[axis=1]", fam, lambda x: st.skew(x, axis=1), (M,), (SYM,))
    case("stats.directional_stats", fam, lambda x: st.directional_stats(x).mean_direction,
         ((4, 3),), (POS,))
    two = {
        "zmap": lambda x, y: st.zmap(x, y), "pearsonr": lambda x, y: st.pearsonr(x, y).statistic,
        "ttest_ind": lambda x, y: st.ttest_ind(x, y).statistic,
        "ttest_rel": lambda x, y: st.ttest_rel(x, y).statistic,
        "bartlett": lambda x, y: st.bartlett(x, y).statistic,
        "levene": lambda x, y: st.levene(x, y).statistic,
        "f_oneway": lambda x, y: st.f_oneway(x, y).statistic,
        "alexandergovern": lambda x, y: st.alexandergovern(x, y).statistic,
        "linregress.slope": lambda x, y: st.linregress(x, y).slope,
        "entropy[qk]": lambda p, q: st.entropy(p, q),
        "wasserstein_distance": lambda u, v: st.wasserstein_distance(u, v),
        "energy_distance": lambda u, v: st.energy_distance(u, v),
    }
    for name, fn in two.items():
        dom = POS if name.startswith("entropy") else SYM
        case(f"stats.{name}", fam, fn, (V, V), (dom, dom))


# ---------------------------------------------------------------------------------------------
# scipy.signal

def _signal():
    import scipy.signal as sg
    fam = "scipy.signal"
    two = {
        "fftconvolve": sg.fftconvolve, "convolve": sg.convolve, "correlate": sg.correlate,
        "oaconvolve": sg.oaconvolve, "upfirdn": lambda h, x: sg.upfirdn(h, x, 2),
    }
    for name, fn in two.items():
        case(f"signal.{name}", fam, fn, (V, (3,)), (SYM,))
    case("signal.convolve2d", fam, sg.convolve2d, (M, (2, 2)), (SYM,))
    case("signal.correlate2d", fam, sg.correlate2d, (M, (2, 2)), (SYM,))
    one = {
        "detrend": sg.detrend, "detrend[constant]": lambda x: sg.detrend(x, type="constant"),
        "savgol_filter": lambda x: sg.savgol_filter(x, 5, 2),
        "hilbert.abs": lambda x: array_namespace(x).abs(sg.hilbert(x)),
        "envelope": lambda x: sg.envelope(x),
        "resample": lambda x: sg.resample(x, 9),
        "resample_poly": lambda x: sg.resample_poly(x, 2, 1),
        "decimate": lambda x: sg.decimate(x, 2, ftype="fir", n=4),
        "cspline1d": sg.cspline1d, "qspline1d": sg.qspline1d,
        "gauss_spline": lambda x: sg.gauss_spline(x, 2),
        "periodogram": lambda x: sg.periodogram(x)[1],
        "welch": lambda x: sg.welch(x, nperseg=4)[1],
        "wiener": lambda x: sg.wiener(x, 3), "medfilt": lambda x: sg.medfilt(x, 3),
        "chirp": lambda t: sg.chirp(t, 1.0, 1.0, 3.0),
        "lfilter": lambda x: sg.lfilter(_const(x, [0.5, 0.25]), _const(x, [1.0, -0.3]), x),
        "filtfilt": lambda x: sg.filtfilt(_const(x, [0.5, 0.25]), _const(x, [1.0, -0.3]), x,
                                          padlen=2),
        "sosfilt": lambda x: sg.sosfilt(_const(x, [[0.5, 0.25, 0.0, 1.0, -0.3, 0.0]]), x),
    }
    for name, fn in one.items():
        case(f"signal.{name}", fam, fn, ((12,),), (SYM,))
    case("signal.lfilter[b]", fam, lambda b, x: sg.lfilter(b, _const(x, [1.0, -0.3]), x),
         ((2,), (8,)), (SYM,))


# ---------------------------------------------------------------------------------------------
# scipy.fft

def _fft():
    import scipy.fft as ft
    fam = "scipy.fft"
    for name in ("fft", "ifft", "rfft", "ihfft"):
        case(f"fft.{name}", fam, lambda x, f=getattr(ft, name): _ri(f(x)), (V,), (SYM,))
    for name in ("fftn", "ifftn", "fft2", "ifft2", "rfftn", "rfft2", "ihfftn", "ihfft2"):
        case(f"fft.{name}", fam, lambda x, f=getattr(ft, name): _ri(f(x)), (M,), (SYM,))
    for name in ("irfft", "hfft"):
        case(f"fft.{name}", fam, getattr(ft, name), (V,), (SYM,))
    for name in ("irfftn", "irfft2", "hfftn", "hfft2"):
        case(f"fft.{name}", fam, getattr(ft, name), (M,), (SYM,))
    for name in ("dct", "idct", "dst", "idst", "fftshift", "ifftshift"):
        case(f"fft.{name}", fam, getattr(ft, name), (V,), (SYM,))
    for name in ("dctn", "idctn", "dstn", "idstn"):
        case(f"fft.{name}", fam, getattr(ft, name), (M,), (SYM,))
    case("fft.dct[type=1]", fam, lambda x: ft.dct(x, type=1), (V,), (SYM,))
    case("fft.fht", fam, lambda a: ft.fht(a, 0.1, 0.5), (V,), (SYM,))
    case("fft.ifht", fam, lambda a: ft.ifht(a, 0.1, 0.5), (V,), (SYM,))
    case("fft.fft[complex input]", fam, lambda x, y: _ri(ft.fft(x + 1j * y)), (V, V), (SYM,))


# ---------------------------------------------------------------------------------------------
# scipy.integrate, scipy.interpolate and the rest of SciPy's array-API functions

def _integrate():
    import scipy.integrate as si
    fam = "scipy.integrate"
    case("integrate.trapezoid", fam, si.trapezoid, (V,), (SYM,))
    case("integrate.trapezoid[x]", fam, lambda y, x: si.trapezoid(y, x), (V, V), (SYM,))
    case("integrate.cumulative_trapezoid", fam, si.cumulative_trapezoid, (V,), (SYM,))
    case("integrate.cumulative_trapezoid[x]", fam,
         lambda y, x: si.cumulative_trapezoid(y, x=x, initial=0), (V, V), (SYM,))
    case("integrate.simpson", fam, si.simpson, ((7,),), (SYM,))
    case("integrate.simpson[dx]", fam, lambda y: si.simpson(y, dx=0.5, axis=-1), (M,), (SYM,))
    case("integrate.cumulative_simpson", fam, si.cumulative_simpson, ((7,),), (SYM,))
    case("integrate.romb", fam, lambda y: si.romb(y, dx=0.25), ((5,),), (SYM,))


def _interpolate():
    import scipy.interpolate as ip
    fam = "scipy.interpolate"
    grid = lambda y: _const(y, [0.0, 0.5, 1.2, 2.0, 2.6, 3.0])     # noqa: E731  (the knots)
    at = lambda y: _const(y, [0.25, 1.0, 1.7, 2.8])                  # noqa: E731  (where to look)
    for name in ("CubicSpline", "PchipInterpolator", "Akima1DInterpolator"):
        cls = getattr(ip, name)
        case(f"interpolate.{name}", fam, lambda y, c=cls: c(grid(y), y)(at(y)), (V,), (SYM,))
    case("interpolate.CubicSpline[at]", fam,
         lambda t: ip.CubicSpline(grid(t), _const(t, [0.1, 0.9, -0.4, 0.3, 0.8, -0.2]))(t),
         ((4,),), ((0.2, 2.8),))
    case("interpolate.make_interp_spline", fam,
         lambda y: ip.make_interp_spline(grid(y), y, k=3)(at(y)), (V,), (SYM,))
    case("interpolate.CubicHermiteSpline", fam,
         lambda y, d: ip.CubicHermiteSpline(grid(y), y, d)(at(y)), (V, V), (SYM,))
    case("interpolate.BSpline", fam,
         lambda c: ip.BSpline(_const(c, [0, 0, 0, 0, 1, 2, 3, 3, 3, 3]), c, 3)(at(c)),
         (V,), (SYM,))
    case("interpolate.RegularGridInterpolator", fam,
         lambda v: ip.RegularGridInterpolator((grid(v),), v)(_const(v, [[0.25], [1.7]])),
         (V,), (SYM,))
    case("interpolate.RBFInterpolator", fam,
         lambda y: ip.RBFInterpolator(_const(y, [[0.0], [0.5], [1.2], [2.0], [2.6], [3.0]]), y)(
             _const(y, [[0.25], [1.7]])), (V,), (SYM,))
    case("interpolate.make_lsq_spline", fam,
         lambda y: ip.make_lsq_spline(grid(y), y, _const(y, [0, 0, 0, 0, 1.5, 3, 3, 3, 3]))(at(y)),
         (V,), (SYM,))


def _scipy_other():
    from scipy.cluster.vq import whiten
    import scipy.linalg as la
    import scipy.optimize as so
    fam = "scipy.other"
    case("cluster.vq.whiten", fam, whiten, (M,), (SYM,))
    case("optimize.rosen", fam, so.rosen, (V,), (SYM,))
    case("optimize.rosen_der", fam, so.rosen_der, (V,), (SYM,))
    case("optimize.rosen_hess_prod", fam, so.rosen_hess_prod, (V, V), (SYM,))
    case("linalg.block_diag", fam, la.block_diag, ((2, 2), (1, 3)), (SYM,))
    case("linalg.orthogonal_procrustes", fam, lambda a, b: la.orthogonal_procrustes(a, b)[0],
         (M2, M2), (SYM,))


# ---------------------------------------------------------------------------------------------
# scikit-learn, with array_api_dispatch=True

def _sklearn_cases():
    import sklearn.metrics as mt
    import sklearn.metrics.pairwise as pw
    import sklearn.preprocessing as pp
    from sklearn.decomposition import PCA
    from sklearn.linear_model import Ridge
    fam = "sklearn.metrics"
    Y = (5, 2)
    raw = {
        "mean_squared_error": mt.mean_squared_error, "mean_absolute_error": mt.mean_absolute_error,
        "r2_score": mt.r2_score, "explained_variance_score": mt.explained_variance_score,
        "root_mean_squared_error": mt.root_mean_squared_error,
        "mean_absolute_percentage_error": mt.mean_absolute_percentage_error,
        "mean_pinball_loss": mt.mean_pinball_loss,
        "median_absolute_error": mt.median_absolute_error,
        "d2_absolute_error_score": mt.d2_absolute_error_score,
        "d2_pinball_score": mt.d2_pinball_score,
    }
    for name, fn in raw.items():
        case(f"sklearn.{name}[raw_values]", fam,
             _sklearn(lambda a, b, f=fn: f(a, b, multioutput="raw_values")), (Y, Y), (POS,))
    scalar = {
        "mean_squared_error": mt.mean_squared_error, "mean_absolute_error": mt.mean_absolute_error,
        "r2_score": mt.r2_score, "explained_variance_score": mt.explained_variance_score,
        "max_error": mt.max_error, "mean_squared_log_error": mt.mean_squared_log_error,
        "mean_poisson_deviance": mt.mean_poisson_deviance,
        "mean_gamma_deviance": mt.mean_gamma_deviance,
        "mean_tweedie_deviance[power=1.5]": functools.partial(mt.mean_tweedie_deviance, power=1.5),
        "d2_tweedie_score[power=1.5]": functools.partial(mt.d2_tweedie_score, power=1.5),
    }
    for name, fn in scalar.items():
        case(f"sklearn.{name}", fam, _sklearn(fn), (V, V), (POS,))

    fam = "sklearn.pairwise"
    kernels = {
        "euclidean_distances": pw.euclidean_distances,
        "euclidean_distances[squared]": functools.partial(pw.euclidean_distances, squared=True),
        "rbf_kernel": functools.partial(pw.rbf_kernel, gamma=0.5),
        "laplacian_kernel": functools.partial(pw.laplacian_kernel, gamma=0.5),
        "polynomial_kernel": functools.partial(pw.polynomial_kernel, degree=2),
        "sigmoid_kernel": functools.partial(pw.sigmoid_kernel, gamma=0.3),
        "linear_kernel": pw.linear_kernel, "cosine_similarity": pw.cosine_similarity,
        "cosine_distances": pw.cosine_distances, "manhattan_distances": pw.manhattan_distances,
        "chi2_kernel": pw.chi2_kernel, "additive_chi2_kernel": pw.additive_chi2_kernel,
        "pairwise_distances[euclidean]": pw.pairwise_distances,
        "pairwise_distances[cityblock]": functools.partial(pw.pairwise_distances,
                                                           metric="cityblock"),
        "pairwise_kernels[rbf]": functools.partial(pw.pairwise_kernels, metric="rbf"),
        "pairwise_kernels[poly]": functools.partial(pw.pairwise_kernels, metric="poly"),
        "paired_euclidean_distances": pw.paired_euclidean_distances,
        "paired_cosine_distances": pw.paired_cosine_distances,
        "paired_manhattan_distances": pw.paired_manhattan_distances,
    }
    for name, fn in kernels.items():
        dom = POS if "chi2" in name else SYM
        shapes = (M, M) if name.startswith("paired") else (M, M2[::-1])
        case(f"sklearn.{name}", fam, _sklearn(fn), shapes, (dom,))

    fam = "sklearn.preprocessing"
    prep = {
        "normalize[l2]": pp.normalize, "normalize[l1]": functools.partial(pp.normalize, norm="l1"),
        "normalize[max]": functools.partial(pp.normalize, norm="max"),
        "scale": pp.scale, "minmax_scale": pp.minmax_scale, "maxabs_scale": pp.maxabs_scale,
        "StandardScaler": lambda x: pp.StandardScaler().fit_transform(x),
        "MinMaxScaler": lambda x: pp.MinMaxScaler().fit_transform(x),
        "MaxAbsScaler": lambda x: pp.MaxAbsScaler().fit_transform(x),
        "Normalizer": lambda x: pp.Normalizer().fit_transform(x),
        "PolynomialFeatures": lambda x: pp.PolynomialFeatures(2).fit_transform(x),
        "KernelCenterer": lambda k: pp.KernelCenterer().fit_transform(k),
        "PCA[full]": lambda x: PCA(2, svd_solver="full").fit(x).explained_variance_,
    }
    for name, fn in prep.items():
        shape = (4, 4) if name == "KernelCenterer" else (5, 3)
        case(f"sklearn.{name}", fam, _sklearn(fn), (shape,), (SYM,))
    case("sklearn.Ridge[svd].coef_", fam,
         _sklearn(lambda x, y: Ridge(alpha=0.5, solver="svd").fit(x, y).coef_), ((5, 3), (5,)),
         (SYM,))


# ---------------------------------------------------------------------------------------------
# array-api-extra: every public function that takes a float array

def _xpx():
    import array_api_extra as xpx
    fam = "array_api_extra"
    one = {
        "apply_where": lambda x: xpx.apply_where(x > 0, x, lambda a: a * a,
                                                 lambda a: array_namespace(a).sin(a)),
        "atleast_nd": lambda x: xpx.atleast_nd(x, ndim=3), "cov": xpx.cov,
        "create_diagonal": xpx.create_diagonal,
        "expand_dims": lambda x: xpx.expand_dims(x, axis=(0, 2)),
        "nan_to_num": xpx.nan_to_num, "pad": lambda x: xpx.pad(x, 2),
        "pad[tuple]": lambda x: xpx.pad(x, ((1, 2), (0, 1)), constant_values=0.5),
        "sinc": xpx.sinc,
        # Only the kth element of a partition is defined (the order of the others is not).
        "partition": lambda x: xpx.partition(x, 2, axis=-1)[:, 2],
        "nanmax": lambda x: xpx.nanmax(x, axis=-1), "nanmin": lambda x: xpx.nanmin(x, axis=-1),
        "nansum": lambda x: xpx.nansum(x, axis=-1), "nanmean": lambda x: xpx.nanmean(x, axis=-1),
        "angle": xpx.angle, "deg2rad": xpx.deg2rad, "rad2deg": xpx.rad2deg,
        "setdiff1d": lambda x: xpx.setdiff1d(x, _const(x, [9.0]), assume_unique=True),
        "union1d": lambda x: xpx.union1d(x, _const(x, [9.0])),
        "lazy_apply": lambda x: xpx.lazy_apply(lambda a: a * 2.0, x, shape=x.shape,
                                               dtype=x.dtype),
        "at.set": lambda x: xpx.at(x)[1].set(x[0] * 3.0),
        "at.multiply": lambda x: xpx.at(x)[1:3].multiply(x[0]),
        "at.divide": lambda x: xpx.at(x)[::2].divide(2.0),
        "at.power": lambda x: xpx.at(x)[0].power(3.0),
        "at.min": lambda x: xpx.at(x)[:, 1].min(0.1), "at.max": lambda x: xpx.at(x)[:, 1].max(0.1),
    }
    for name, fn in one.items():
        dom = POS if name in ("at.divide", "at.power") else SYM
        case(f"xpx.{name}", fam, fn, (M,), (dom,))
    case("xpx.kron", fam, xpx.kron, ((2, 2), (2, 3)), (SYM,))
    case("xpx.at.add", fam, lambda x, y: xpx.at(x)[1:3].add(y), (V, (2,)), (SYM,))
    case("xpx.at.subtract", fam, lambda x, y: xpx.at(x)[2].subtract(y[0]), (V, (1,)), (SYM,))


# ---------------------------------------------------------------------------------------------
# einops: its array-API module and its top-level functions on array-API arrays

def _einops():
    import einops
    import einops.array_api as ea
    fam = "einops"
    X = (2, 3, 4)
    for mod, tag in ((ea, "array_api"), (einops, "einops")):
        case(f"{tag}.rearrange[transpose]", fam, lambda x, m=mod: m.rearrange(x, "a b c -> c a b"),
             (X,), (SYM,))
        case(f"{tag}.rearrange[merge]", fam, lambda x, m=mod: m.rearrange(x, "a b c -> a (b c)"),
             (X,), (SYM,))
        case(f"{tag}.rearrange[split]", fam,
             lambda x, m=mod: m.rearrange(x, "a b (c d) -> a b c d", d=2), (X,), (SYM,))
        for red in ("sum", "mean", "max", "min", "prod"):
            case(f"{tag}.reduce[{red}]", fam,
                 lambda x, m=mod, r=red: m.reduce(x, "a b c -> a c", r), (X,), (SYM,))
        case(f"{tag}.repeat", fam, lambda x, m=mod: m.repeat(x, "a b c -> a b c r", r=2), (X,),
             (SYM,))
        case(f"{tag}.pack", fam, lambda x, y, m=mod: m.pack([x, y], "a *")[0], ((2, 3), (2,)),
             (SYM,))
    case("einops.einsum", fam, lambda x, y: einops.einsum(x, y, "i j, j k -> i k"), (M, M2),
         (SYM,))


for _family in (_special, _stats, _signal, _fft, _integrate, _interpolate, _scipy_other,
                _sklearn_cases, _xpx, _einops):
    try:
        _family()
    except ImportError:    # a missing optional package drops its family, never the module
        pass

FAMILIES = sorted({c.family for c in CASES})
CASES_BY_ID = {c.id: c for c in CASES}


# =============================================================================================
# The harness: run one case under one transform of one library, and classify the outcome

TRANSFORMS = ("grad", "jvp", "vmap")
ARRAYAD_BACKENDS = ("numpy", "array_api_strict", "torch")
LIBRARIES = ("arrayad", "torch.func", "jax")
BATCH = 3
EPS = 1e-6              # central differences in float64: error ~1e-10 relative
RTOL, ATOL = 1e-5, 1e-5


@dataclasses.dataclass(frozen=True)
class Outcome:
    status: str         # "ok", "raises" or "WRONG"
    detail: str = ""    # "ExceptionType: first line" (raises), what disagrees (WRONG)
    builtin: str = ""   # raises: the exception's nearest builtin class (for pytest's raises=)

    def __str__(self):
        return self.status + (f" ({self.detail})" if self.detail else "")


def first_line(exc):
    """``Type: first line of the message`` of an exception, the form the known-failures table and
    the docs show."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def nearest_builtin(exc):
    import builtins
    for cls in type(exc).__mro__:
        if getattr(builtins, cls.__name__, None) is cls:
            return cls.__name__
    return "Exception"


def _reduce(out):
    """The scalar that grad differentiates: sum(sin(out)). Not plain sum(out): the outputs of
    softmax, normalize or zscore sum to a constant, which would hide a wrong derivative."""
    xp = array_namespace(out)
    return xp.sum(xp.sin(out))


@contextlib.contextmanager
def _quiet():
    # Libraries warn about small samples, arrayad about its vmap fallback: not outcomes here.
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        yield


def _np_call(case, args):
    # Copies: array-api-extra's ``at`` may update a writeable NumPy input in place.
    return np.asarray(case.fn(*[np.array(a) for a in args]), dtype=np.float64)


@functools.lru_cache(maxsize=None)
def reference(case_id):
    """What each transform must give, computed by the library itself on plain NumPy arrays:
    the gradient of sum(sin(f)) by central differences one element at a time, the JVP by a central
    difference along the case's directions, vmap by a Python loop over the batch."""
    c = CASES_BY_ID[case_id]
    xs, vs = c.inputs(), c.directions()
    with _quiet():
        out = _np_call(c, xs)
        grads = []
        for i, x in enumerate(xs):
            g = np.empty_like(x)
            for j in np.ndindex(x.shape):
                e = np.zeros_like(x)
                e[j] = EPS
                plus = np.sum(np.sin(_np_call(c, xs[:i] + (x + e,) + xs[i + 1:])))
                minus = np.sum(np.sin(_np_call(c, xs[:i] + (x - e,) + xs[i + 1:])))
                g[j] = (plus - minus) / (2 * EPS)
            grads.append(g)
        tangent = (_np_call(c, [x + EPS * v for x, v in zip(xs, vs)])
                   - _np_call(c, [x - EPS * v for x, v in zip(xs, vs)])) / (2 * EPS)
        batch = c.inputs(batch=BATCH)
        loop = np.stack([_np_call(c, [b[k] for b in batch]) for k in range(BATCH)])
    return {"out": out, "grad": tuple(grads), "tangent": tangent, "vmap": loop}


# --- moving data in and out of each library --------------------------------------------------

def _to_backend(a, name):
    if name == "numpy":
        return np.array(a)
    if name == "array_api_strict":
        import array_api_strict
        return array_api_strict.asarray(a)
    if name == "torch":
        import torch
        return torch.asarray(a, dtype=torch.float64)
    if name == "jax":
        import jax
        jax.config.update("jax_enable_x64", True)
        return jax.numpy.asarray(a, dtype=jax.numpy.float64)
    raise ValueError(f"third_party_cases: unknown backend {name!r}")


def _to_np(x):
    mod = type(x).__module__
    if mod.startswith("torch"):
        return x.detach().cpu().numpy()
    if mod.startswith("arrayad"):
        from arrayad.backends import backend_of
        x = x.detach()._value if hasattr(x, "detach") else x
        return np.asarray(backend_of(x).to_numpy(x))
    return np.asarray(x)


def _transforms(library):
    """``(grad, jvp, vmap)`` of one library, with torch.func's signatures."""
    if library == "arrayad":
        from arrayad import func
        return func.grad, func.jvp, func.vmap
    if library == "torch.func":
        import torch.func as tf
        return tf.grad, tf.jvp, tf.vmap
    if library == "jax":
        import jax
        return jax.grad, lambda f, p, t: jax.jvp(f, p, t), jax.vmap
    raise ValueError(f"third_party_cases: unknown library {library!r}")


def _mismatch(what, got, want):
    """None if ``got`` agrees with ``want`` (NumPy, float64), else a one-line account."""
    got = np.asarray(got)
    if got.shape != want.shape:
        return f"{what}: shape {got.shape}, expected {want.shape}"
    scale = max(1.0, float(np.max(np.abs(want)))) if want.size else 1.0
    if not np.allclose(got, want, rtol=RTOL, atol=ATOL * scale, equal_nan=True):
        with np.errstate(all="ignore"):
            err = np.max(np.abs(got - want))
        return f"{what}: max abs error {err:.2e} (scale {scale:.2g})"
    return None


def run(case, transform, library="arrayad", backend="numpy", reraise=False):
    """Apply ``transform`` of ``library`` to ``case`` on ``backend``'s arrays -> ``Outcome``.

    ``backend`` matters for arrayad only (its inputs' library); torch.func always gets torch
    tensors and JAX JAX arrays. The reference is computed first, outside any transform, so that a
    case whose plain NumPy call fails errors here instead of counting against a library.
    ``reraise``: let the library's exception propagate instead of returning "raises" (the test
    module's known failures are ``xfail(raises=...)``)."""
    ref = reference(case.id)
    if library == "torch.func":
        backend = "torch"
    elif library == "jax":
        backend = "jax"
    grad, jvp, vmap = _transforms(library)
    n = case.nargs
    try:
        with _quiet():
            if transform == "grad":
                xs = [_to_backend(x, backend) for x in case.inputs()]
                argnums = tuple(range(n)) if n > 1 else 0
                got = grad(lambda *a: _reduce(case.fn(*a)), argnums=argnums)(*xs)
                got = tuple(got) if n > 1 else (got,)
                bad = next(filter(None, (_mismatch(f"grad wrt argument {i}", _to_np(g), r)
                                         for i, (g, r) in enumerate(zip(got, ref["grad"])))), None)
            elif transform == "jvp":
                xs = tuple(_to_backend(x, backend) for x in case.inputs())
                vs = tuple(_to_backend(v, backend) for v in case.directions())
                out, tangent = jvp(case.fn, xs, vs)
                bad = (_mismatch("jvp primal", _to_np(out), ref["out"])
                       or _mismatch("jvp tangent", _to_np(tangent), ref["tangent"]))
            elif transform == "vmap":
                xs = [_to_backend(x, backend) for x in case.inputs(batch=BATCH)]
                bad = _mismatch("vmap vs loop", _to_np(vmap(case.fn)(*xs)), ref["vmap"])
            else:
                raise ValueError(f"third_party_cases.run: unknown transform {transform!r}")
    except Exception as e:   # noqa: BLE001  (any exception is the outcome "raises")
        if reraise:
            raise
        return Outcome("raises", first_line(e), nearest_builtin(e))
    return Outcome("WRONG", bad) if bad else Outcome("ok")
