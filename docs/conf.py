"""Sphinx configuration of arrayad's documentation site.

Sphinx with MyST-NB, as NumPy, SciPy and JAX do: pages are MyST markdown, tutorials are MyST
notebooks executed on every build (a failing cell fails the build), and the API reference is
generated from the docstrings (``_ext/api_pages.py`` lists every public name). Build it with
``python tools/build_docs.py`` (warnings are errors, then the link and figure checks).
"""

import logging
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(_HERE, "_ext"))
# The notebooks run in kernels of their own, which would import whichever arrayad is installed
# (another checkout's, with another build of the core): make them import this checkout's.
_ROOT = os.path.dirname(_HERE)
sys.path.insert(0, _ROOT)
os.environ["PYTHONPATH"] = os.pathsep.join(
    [_ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])

# The notebooks' kernels log a warning each about their local TCP connection; the build log shows
# only what concerns the site: kernels read this IPython configuration, which keeps their own log
# to errors (the cells' output, warnings included, is unaffected).
_IPYTHONDIR = os.path.join(_HERE, "_build", "ipython")
os.makedirs(os.path.join(_IPYTHONDIR, "profile_default"), exist_ok=True)
with open(os.path.join(_IPYTHONDIR, "profile_default", "ipython_kernel_config.py"), "w") as _f:
    _f.write('c.IPKernelApp.log_level = "ERROR"\n')
os.environ["IPYTHONDIR"] = _IPYTHONDIR


class _NoConfigDump(logging.Filter):
    """MyST and MyST-NB log their whole configuration at startup: not part of the build's report."""

    def filter(self, record):
        return not str(record.msg).startswith(("\x1b[01mmyst", "myst"))


for _name in ("sphinx.myst_parser.sphinx_ext.main", "sphinx.myst_nb.sphinx_ext"):
    logging.getLogger(_name).addFilter(_NoConfigDump())

import arrayad  # noqa: E402

project = "arrayad"
author = "the arrayad developers"
copyright = "2026, the arrayad developers"
release = version = arrayad.__version__

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "api_pages",
]

exclude_patterns = ["_build", "_ext", "**.ipynb_checkpoints", "jupyter_execute"]
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb"}

# Markdown
myst_enable_extensions = ["colon_fence", "dollarmath", "deflist"]
myst_heading_anchors = 3          # `[text](page.md#a-heading)` links resolve
suppress_warnings = ["myst.header"]   # the pages moved from GitHub start at level-2 headings

# Notebooks: executed on every build, in their own folder, a failing cell fails the build.
nb_execution_mode = "force"
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_execution_timeout = 600
nb_execution_in_temp = False

# API reference
autosummary_generate = False      # api_pages writes the pages itself
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
napoleon_numpy_docstring = True
napoleon_google_docstring = False
napoleon_use_rtype = False

html_theme = "pydata_sphinx_theme"
html_title = "arrayad"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    # the seven top-level sections (index.md's toctree) all in the navbar, none under "More"
    "header_links_before_dropdown": 7,
}
html_static_path = []
