"""Build the documentation site and check it: ``python tools/build_docs.py``.

1. ``sphinx-build -W --keep-going -b html docs docs/_build/html`` from a clean output folder:
   warnings are errors and every tutorial is executed (a failing cell fails the build).
2. Every internal link of the built site (``href``/``src`` that is not an external URL) points
   to a file of the site, and its ``#anchor`` to an id of that page.
3. Every tutorial page shows at least one figure made by its code in this build: an image inside
   a cell's output whose file was written after the build started.
4. No page shows a path of the machine that built it (``/work/``, ``/home/``, ``/tmp/``: the
   files of a kernel's tracebacks, say), and no user page speaks of how arrayad is developed
   (pointers to the core's named notes, its private source files, "issue", "session",
   "engineer"): that belongs to the page for contributors (``internals``), which is exempt.
5. Every tutorial asserts in its code what its prose says about the numbers it prints (a
   contradicting number then fails the cell, and the build): its source has an ``assert``.
6. The performance history (``asv publish`` of the results committed in ``asv_bench/results``)
   is written into the site as ``benchmark-history/``, which the performance page links to; its
   pages are asv's own and are not checked as the site's pages are.

Exit status 0 when all hold; otherwise the problems, one a line.
"""

import argparse
import html.parser
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.parse

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")

# Paths of a build machine, which no page of the site may show.
MACHINE_PATHS = re.compile(r"(?<![\w.])/(?:work|home|tmp)/")
# Words about how arrayad is developed, for the contributors' page only.
INTERNAL_WORDING = re.compile(
    r"NOTE \[|\.pyx\b|arrayad/_\w|\bissues?\b|\bsessions?\b|\bengineers?\b|merging main",
    re.IGNORECASE)
CONTRIBUTOR_PAGES = {"internals.html"}
# asv's history pages, published into the site (6.)
HISTORY = "benchmark-history"


class _Page(html.parser.HTMLParser):
    """The ids, the links and the images (and whether each is in a cell's output) of a page."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids, self.links, self.output_images = set(), [], []
        self.text = []           # the text a reader sees (not scripts, styles or the search box)
        self._open = []          # for each open element: whether it starts a cell output
        self._hidden = 0         # depth inside <script>/<style>

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.add(attrs["id"])
        if tag == "a" and "name" in attrs:
            self.ids.add(attrs["name"])
        for key in ("href", "src"):
            if attrs.get(key):
                self.links.append(attrs[key])
        in_output = any(self._open)
        if tag == "img" and in_output:
            self.output_images.append(attrs.get("src", ""))
        if tag not in ("img", "br", "hr", "meta", "link", "input", "source"):
            self._open.append("cell_output" in (attrs.get("class") or "").split())
        if tag in ("script", "style"):
            self._hidden += 1

    def handle_endtag(self, tag):
        if tag not in ("img", "br", "hr", "meta", "link", "input", "source") and self._open:
            self._open.pop()
        if tag in ("script", "style") and self._hidden:
            self._hidden -= 1

    def handle_data(self, data):
        if not self._hidden:
            self.text.append(data)


def _parse(path):
    page = _Page()
    with open(path, encoding="utf-8") as f:
        page.feed(f.read())
    return page


def check_site(out, started):
    """The problems of the built site in ``out`` (a list of strings)."""
    pages = {}
    for folder, dirs, files in os.walk(out):
        # the theme's templates and the copied sources are not pages of the site
        # (nor are asv's history pages)
        dirs[:] = [d for d in dirs if d not in ("_static", "_sources", HISTORY)] \
            if folder == out else dirs
        for name in files:
            if name.endswith(".html"):
                path = os.path.join(folder, name)
                pages[os.path.normpath(path)] = _parse(path)
    problems = []
    for path, page in sorted(pages.items()):
        where = os.path.relpath(path, out)
        for link in page.links:
            url = urllib.parse.urlparse(link)
            if url.scheme or link.startswith("//"):
                continue          # external: not checked (the build machine is offline)
            target = path if not url.path else os.path.normpath(
                os.path.join(os.path.dirname(path), urllib.parse.unquote(url.path)))
            if os.path.isdir(target):
                target = os.path.join(target, "index.html")
            if not os.path.exists(target):
                problems.append(f"{where}: broken link {link!r}")
            elif url.fragment and target.endswith(".html"):
                if url.fragment not in pages[target].ids:
                    problems.append(f"{where}: link {link!r}: no anchor #{url.fragment}")
    for path, page in sorted(pages.items()):
        where = os.path.relpath(path, out)
        text = " ".join("".join(page.text).split())
        found = [(m.start(), "a path of the build machine", m.group())
                 for m in MACHINE_PATHS.finditer(text)]
        found += [(m.start(), "internal wording (for the contributors' page)", m.group())
                  for m in INTERNAL_WORDING.finditer(text)
                  if os.path.basename(where) not in CONTRIBUTOR_PAGES]
        for start, what, phrase in sorted(found):
            context = text[max(0, start - 40):start + len(phrase) + 40]
            problems.append(f"{where}: {what} {phrase!r}: ...{context}...")
    tutorials = [p for p in pages if os.path.relpath(p, out).startswith("tutorials" + os.sep)
                 and not p.endswith("index.html")]
    if not tutorials:
        problems.append("no tutorial pages were built")
    for path in sorted(tutorials):
        where = os.path.relpath(path, out)
        images = pages[path].output_images
        if not images:
            problems.append(f"{where}: no figure made by the tutorial's code")
        for src in images:
            if src.startswith("data:"):
                continue      # an inline image is produced with the page itself
            image = os.path.normpath(os.path.join(os.path.dirname(path), src))
            if not os.path.exists(image):
                problems.append(f"{where}: figure {src!r} is missing")
            elif os.path.getmtime(image) < started:
                problems.append(f"{where}: figure {src!r} was not made by this build")
    for path in sorted(tutorials):
        source = os.path.join(DOCS, os.path.relpath(path, out))[:-len(".html")] + ".md"
        if os.path.exists(source) and not re.search(r"^\s*assert\b", open(
                source, encoding="utf-8").read(), re.MULTILINE):
            problems.append(f"{os.path.relpath(path, out)}: no assert: the numbers its prose "
                            "discusses are not checked by its code")
    return problems


def publish_history(where):
    """asv's history pages of the committed results (``tools/asv_history.py history`` adds
    to them), written to ``where``."""
    asv_dir = os.path.join(ROOT, "asv_bench")
    cmd = [sys.executable, "-m", "asv", "publish", "--no-pull", "--html-dir", where]
    print(" ".join(cmd), flush=True)
    return subprocess.call(cmd, cwd=asv_dir)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(DOCS, "_build", "html"))
    parser.add_argument("--check-only", action="store_true",
                        help="check an existing build instead of building")
    args = parser.parse_args(argv)
    started = time.time()
    if not args.check_only:
        shutil.rmtree(args.out, ignore_errors=True)
        shutil.rmtree(os.path.join(DOCS, "_build", "jupyter_execute"), ignore_errors=True)
        doctrees = os.path.join(DOCS, "_build", "doctrees")
        shutil.rmtree(doctrees, ignore_errors=True)
        cmd = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-b", "html",
               "-d", doctrees, DOCS, args.out]
        print(" ".join(cmd), flush=True)
        rc = subprocess.call(cmd, cwd=ROOT)
        if rc:
            print(f"sphinx-build failed (exit {rc})")
            return rc
        rc = publish_history(os.path.join(args.out, HISTORY))
        if rc:
            print(f"asv publish failed (exit {rc})")
            return rc
    else:
        started = 0.0
    problems = check_site(args.out, started)
    for p in problems:
        print(p)
    print(f"checked {args.out}: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
