"""Run GradBench's evals against arrayad (eager and ``--jit``), GradBench's JAX tool and its PyTorch
tool, without GradBench's Rust CLI, and print one Markdown table of the timings.

    python benchmarks/gradbench/run.py --gradbench ~/gradbench [--evals lse gmm] [-o results.md]

For every (eval, tool) pair this script starts the eval (GradBench's Python eval, from the
checkout) and the tool as two subprocesses and passes each line one writes to the other: it is
the intermediary of GradBench's protocol. The eval validates each answer itself, against
GradBench's hand-written C++ tool (``tools/manual``, built here with ``make`` if it is not built:
it needs a C++ compiler and ``cpp/json.hpp``, e.g. Debian's ``nlohmann-json3-dev`` copied
there), and reports ``valid`` in its ``analysis`` messages, which this script records.

Every tool runs single-threaded (OMP_NUM_THREADS=1 and friends; GradBench's JAX tool pins itself
to one CPU). GradBench's JAX tool is run through ``jax_blocking.py``, which turns x64 on for every
module and makes each timed call wait for its result (``jax.block_until_ready``): the tool as
published times JAX's asynchronous dispatch only. Nothing of GradBench is copied here: the
checkout's own files run.

Files GradBench's repository does not hold are replaced by stand-ins, generated here and named in
the output: the lstm eval's text (``evals/lstm/data/lstm_full.txt``) becomes seeded ASCII text of
English-like words. Evals run in a scratch directory that links the checkout's ``tools`` and holds
the stand-ins, so the checkout is not modified.
"""

import argparse
import datetime
import importlib.util
import json
import os
import random
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

ALL_EVALS = ["hello", "lse", "gmm", "kmeans", "ode", "llsq", "lstm", "det", "saddle", "particle",
             "ba"]
ALL_TOOLS = ["arrayad", "arrayad-jit", "jax", "pytorch"]
TOOL_TITLES = {"arrayad": "arrayad", "arrayad-jit": "arrayad.jit", "jax": "JAX (jit)",
               "pytorch": "PyTorch"}
# The evals GradBench's JAX and PyTorch tools implement (their directories' modules).
PEER_MODULES = {
    "jax": {"hello", "lse", "gmm", "kmeans", "llsq", "ode"},
    "pytorch": {"hello", "lse", "gmm", "kmeans", "lstm", "ba", "ht"},
}
# Arguments of the evals' run.py (sizes, runs): their own defaults unless named here
# (``--eval-args EVAL="ARGS"`` overrides). One call of saddle or particle is seconds to minutes of
# nested descent in Python: one run each.
DEFAULT_EVAL_ARGS = {"saddle": "--min-runs 1 --min-seconds 0",
                     "particle": "--min-runs 1 --min-seconds 0"}

SINGLE_THREAD = {
    "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
    "NUMBA_NUM_THREADS": "1", "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false "
    "intra_op_parallelism_threads=1",
}


def lstm_text(characters):
    """Stand-in for GradBench's lstm_full.txt (not in its repository): seeded ASCII prose."""
    words = ("the of and to in is that it was for on are as with his they at be this from have "
             "or by one had not but what all were when we there can an your which their said if "
             "do will each about how up out them then she many some so these would other into "
             "has more her two like him see time could no make than first been its who now people "
             "my made over did down only way find use may water long little very after words "
             "called just where most know get through back much before go good new write our "
             "used me man too any day same right look think also around another came come work "
             "three word must because does part even place well such here take why things help "
             "put years different away again off went old number great tell men say small every "
             "found still between name should home big give air line set own under read last "
             "never us left end along while might next sound below saw something thought both "
             "few those always looked show large often together asked house world going want "
             "school important until form food keep children feet land side without boy once "
             "animals life enough took sometimes four head above kind began almost live page got "
             "earth need far hand high year mother light parts country father let night following "
             "picture being study second eyes soon times story boys since white days ever paper "
             "hard near sentence better best across during today others however sure means knew "
             "try told young miles sun ways thing whole hear example heard several change answer "
             "room sea against top turned learn point city play toward five using himself usually")
    vocabulary = words.split()
    rng = random.Random(31337)
    pieces, length, sentence = [], 0, 0
    while length < characters:
        word = rng.choice(vocabulary)
        if sentence == 0:
            word = word.capitalize()
        sentence += 1
        if sentence > rng.randint(6, 18):
            word += rng.choice([".", ".", ".", "?", "!"]) + ("\n" if rng.random() < 0.2 else "")
            sentence = 0
        elif rng.random() < 0.08:
            word += ","
        pieces.append(word)
        length += len(word) + 1
    return " ".join(pieces)[:characters]


def scratch_directory(gradbench, evals, stand_ins):
    """A working directory for the evals: ``tools`` links the checkout's (the golden tool is
    found at ``tools/manual/bin``), each ``evals/NAME/data`` links the checkout's, and the lstm
    text, which the repository lacks, is a stand-in."""
    scratch = Path(tempfile.mkdtemp(prefix="gradbench-run-"))
    (scratch / "tools").symlink_to(gradbench / "tools")
    for data in sorted((gradbench / "evals").glob("*/data")):
        if data.parent.name != "lstm":
            (scratch / "evals" / data.parent.name).mkdir(parents=True)
            (scratch / "evals" / data.parent.name / "data").symlink_to(data)
    text = gradbench / "evals" / "lstm" / "data" / "lstm_full.txt"
    target = scratch / "evals" / "lstm" / "data" / "lstm_full.txt"
    target.parent.mkdir(parents=True)
    try:
        target.write_text(text.read_text(encoding="utf8"), encoding="utf8")
    except (OSError, UnicodeDecodeError):
        target.write_text(lstm_text(8192 * 4), encoding="ascii")
        if "lstm" in evals:
            stand_ins.append(
                "lstm: `evals/lstm/data/lstm_full.txt` is not in GradBench's repository; a "
                "stand-in of seeded ASCII English-like words was generated (7 bits per "
                "character, as for ASCII text)")
    return scratch


def build_golden(gradbench, evals):
    manual = gradbench / "tools" / "manual"
    for name in evals:  # saddle and particle have no golden program: they check fixed values
        if (manual / f"{name}.cpp").exists() and not (manual / "bin" / name).exists():
            subprocess.run(["make", "-C", str(gradbench / "tools" / "manual"), f"bin/{name}"],
                           check=True, stdout=subprocess.DEVNULL)


def tool_command(tool, gradbench, python):
    if tool == "arrayad":
        return [python, "-m", "arrayad_tool"]
    if tool == "arrayad-jit":
        return [python, "-m", "arrayad_tool", "--jit"]
    if tool == "jax":
        return [python, str(HERE / "jax_blocking.py"), str(gradbench)]
    if tool == "pytorch":
        return [python, str(gradbench / "python/gradbench/gradbench/tools/pytorch/run.py")]
    raise ValueError(tool)


def run_session(eval_name, eval_args, tool, args, scratch, log):
    """One eval against one tool; returns the evaluate records, in order."""
    gradbench = args.gradbench
    environment = dict(os.environ, **SINGLE_THREAD)
    python_path = [str(gradbench / "python" / "gradbench"), str(HERE),
                   str(HERE.parents[1])]  # the worktree's arrayad before an installed one
    environment["PYTHONPATH"] = os.pathsep.join(
        python_path + [p for p in [os.environ.get("PYTHONPATH")] if p] + args.tool_path)
    eval_command = [args.eval_python,
                    str(gradbench / "python/gradbench/gradbench/evals" / eval_name / "run.py"),
                    "--min-runs", str(args.min_runs), "--min-seconds", str(args.min_seconds),
                    *eval_args]
    stderr_eval = open(log / f"{eval_name}.{tool}.eval.stderr", "w")
    stderr_tool = open(log / f"{eval_name}.{tool}.tool.stderr", "w")
    evaluator = subprocess.Popen(eval_command, cwd=scratch, env=environment, text=True,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr_eval)
    implementation = subprocess.Popen(
        tool_command(tool, gradbench, sys.executable), cwd=scratch, env=environment, text=True,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr_tool)
    timed_out = threading.Event()

    def stop():
        timed_out.set()
        for process in (evaluator, implementation):
            process.kill()

    watchdog = threading.Timer(args.timeout, stop)
    watchdog.start()
    records, by_id, transcript = [], {}, open(log / f"{eval_name}.{tool}.jsonl", "w")
    try:
        for line in evaluator.stdout:
            message = json.loads(line)
            implementation.stdin.write(line)
            implementation.stdin.flush()
            if message.get("kind") == "end":
                break
            reply = implementation.stdout.readline()
            if not reply:
                break
            response = json.loads(reply)
            evaluator.stdin.write(reply)
            evaluator.stdin.flush()
            shown = {k: v for k, v in message.items() if k != "input"}
            transcript.write(json.dumps({"message": shown, "response": {
                k: v for k, v in response.items() if k != "output"}}) + "\n")
            if message["kind"] == "define" and not response.get("success"):
                records.append({"undefined": True, "error": response.get("error")})
            elif message["kind"] == "evaluate":
                record = {"function": message["function"],
                          "size": message.get("description", ""),
                          "success": response.get("success", False),
                          "error": response.get("error"),
                          "timings": [t["nanoseconds"] for t in response.get("timings") or []
                                      if t["name"] == "evaluate"],
                          "valid": None}
                records.append(record)
                by_id[message["id"]] = record
            elif message["kind"] == "analysis" and message["of"] in by_id:
                by_id[message["of"]]["valid"] = message["valid"]
                if not message["valid"]:
                    by_id[message["of"]]["error"] = message.get("error")
    except (BrokenPipeError, json.JSONDecodeError) as error:
        records.append({"broken": repr(error)})
    finally:
        watchdog.cancel()
        for stream in (implementation.stdin, evaluator.stdin):
            try:
                stream.close()
            except BrokenPipeError:
                pass
        for process in (evaluator, implementation):
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
        transcript.close()
        stderr_eval.close()
        stderr_tool.close()
    if timed_out.is_set():
        records.append({"timed_out": args.timeout})
    return records


def milliseconds(ns):
    value = ns / 1e6
    if value >= 100:
        return f"{value:,.0f} ms"
    if value >= 1:
        return f"{value:.2f} ms"
    return f"{value * 1000:.0f} us"


def ratio(a, b):
    return f"{a / b:.2f}x" if a and b else "-"


def table(results, tools, statistic="median"):
    """One row per (eval, size, function) in the evals' order."""
    rows, order = {}, []
    for (eval_name, tool), records in results.items():
        for record in records:
            if "function" not in record:
                continue
            key = (eval_name, record["size"] or "-", record["function"])
            if key not in rows:
                rows[key] = {}
                order.append(key)
            rows[key][tool] = record
    head = (["eval", "size", "function"] + [TOOL_TITLES[t] for t in tools]
            + ["jit / JAX", "jit / eager", "validated"])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for key in order:
        cells = rows[key]

        def center(tool):
            record = cells.get(tool)
            if record and record["success"] and record["timings"]:
                runs = record["timings"][1:] or record["timings"]
                return statistics.median(runs) if statistic == "median" else min(runs)
            return None

        def shown(tool):
            record = cells.get(tool)
            if record is None:
                return "-"
            if not record["success"]:
                return "failed"
            return milliseconds(center(tool)) + ("" if record["valid"] else " (invalid)")

        invalid = [TOOL_TITLES[t] for t, r in cells.items()
                   if not (r["success"] and r["valid"])]
        validated = "yes" if not invalid else "no: " + ", ".join(invalid)
        lines.append("| " + " | ".join(
            list(key) + [shown(t) for t in tools]
            + [ratio(center("arrayad-jit"), center("jax")),
               ratio(center("arrayad-jit"), center("arrayad")), validated]) + " |")
    return "\n".join(lines)


def first_calls(results, tools):
    """The first timed call of the jitted tools (tracing and compiling included)."""
    jitted = [t for t in tools if t in ("arrayad-jit", "jax")]
    head = ["eval", "size", "function"] + [f"{TOOL_TITLES[t]} first call" for t in jitted]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    seen = {}
    for (eval_name, tool), records in results.items():
        if tool not in jitted:
            continue
        for record in records:
            if "function" in record and record["success"] and record["timings"]:
                key = (eval_name, record["size"] or "-", record["function"])
                seen.setdefault(key, {})[tool] = milliseconds(record["timings"][0])
    for key, cells in seen.items():
        lines.append("| " + " | ".join(list(key) + [cells.get(t, "-") for t in jitted]) + " |")
    return "\n".join(lines)


def problems_of(results):
    problems = []
    for (eval_name, tool), records in results.items():
        for record in records:
            if "function" in record and not (record["success"] and record["valid"]):
                problems.append(f"{eval_name} {record['size']} {record['function']} "
                                f"({tool}): {(record['error'] or '').strip()[-600:]}")
            elif record.get("undefined"):
                problems.append(f"{eval_name} ({tool}) declined the eval: "
                                f"{(record.get('error') or '').strip()[-600:]}")
            elif "function" not in record:
                problems.append(f"{eval_name} ({tool}): {str(record)[-600:]}")
    return problems


def report(results, header, statistic):
    present = {tool for _, tool in results}
    tools = [t for t in ALL_TOOLS if t in present]
    lines = header + [
        f"Each time is the {statistic} of an evaluation's runs after the first (the first, "
        "with tracing and compilation, is in the second table); `validated` is the eval's own "
        "check (against GradBench's hand-written tool, or fixed values for saddle and "
        "particle), for every tool in the row.", "",
        table(results, tools, statistic), "",
        "First timed call (tracing and compilation included):", "",
        first_calls(results, tools)]
    problems = problems_of(results)
    if problems:
        lines += ["", "Problems:", ""] + [f"- {p}" for p in problems]
    return "\n".join(lines)


def run_all(args):
    """Runs every eval against every tool; returns the results and a header for the report."""
    args.gradbench = args.gradbench.resolve()
    sizes = dict(DEFAULT_EVAL_ARGS)
    for item in args.eval_args:
        name, _, value = item.partition("=")
        sizes[name] = value
    tools = [t for t in args.tools
             if t not in PEER_MODULES or importlib.util.find_spec(t.replace("pytorch", "torch"))]
    skipped = [t for t in args.tools if t not in tools]
    log = args.log_dir or Path(tempfile.mkdtemp(prefix="gradbench-logs-"))
    log.mkdir(parents=True, exist_ok=True)
    stand_ins = []
    build_golden(args.gradbench, args.evals)
    scratch = scratch_directory(args.gradbench, args.evals, stand_ins)
    started = datetime.datetime.now(datetime.timezone.utc)

    results = {}
    for eval_name in args.evals:
        for tool in tools:
            if tool in PEER_MODULES and eval_name not in PEER_MODULES[tool]:
                continue
            begin = time.perf_counter()
            eval_args = sizes.get(f"{eval_name}@{tool}", sizes.get(eval_name, ""))
            records = run_session(eval_name, shlex.split(eval_args), tool, args, scratch, log)
            results[(eval_name, tool)] = records
            print(f"{eval_name:8} {tool:12} {time.perf_counter() - begin:7.1f} s, "
                  f"{sum('function' in r for r in records)} evaluations", file=sys.stderr)
    print(f"logs: {log}", file=sys.stderr)

    command = " ".join(shlex.quote(a) for a in ["python"] + sys.argv)
    revision = subprocess.run(["git", "-C", str(args.gradbench), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True).stdout.strip()
    header = [
        f"Command: `OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 {command}`",
        "",
        f"Started {started:%Y-%m-%d %H:%M} UTC; GradBench at {revision}. Each evaluation runs "
        f"at least {args.min_runs} times and {args.min_seconds} s unless its eval arguments say "
        "otherwise. Eval arguments: "
        + "; ".join(f"{e}: `{sizes[e]}`" if sizes.get(e) else f"{e}: the eval's defaults"
                    for e in args.evals)
        + "".join(f"; {key.replace('@', ' for ')}: `{value}`" for key, value in sizes.items()
                  if "@" in key) + ".",
        "",
    ]
    if skipped:
        header += ["Not installed, skipped: " + ", ".join(skipped) + ".", ""]
    header += ["Stand-ins: " + ("; ".join(stand_ins) if stand_ins else "none") + ".", ""]
    return results, header


def load_raw(paths):
    """Results of earlier runs, merged: an eval in a later file replaces it in earlier ones."""
    results, header = {}, []
    for path in paths:
        raw = json.loads(Path(path).read_text())
        if "results" not in raw:  # a file of results only
            raw = {"results": raw, "header": []}
        found = {tuple(key.split("/")): records for key, records in raw["results"].items()}
        results = {key: r for key, r in results.items()
                   if key[0] not in {e for e, _ in found}}
        results.update(found)
        header += raw["header"]
    order = {name: i for i, name in enumerate(ALL_EVALS)}
    tool_order = {name: i for i, name in enumerate(ALL_TOOLS)}
    results = dict(sorted(results.items(),
                          key=lambda item: (order[item[0][0]], tool_order[item[0][1]])))
    return results, header


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gradbench", type=Path,
                        help="a checkout of github.com/gradbench/gradbench")
    parser.add_argument("--evals", nargs="+", default=ALL_EVALS, choices=ALL_EVALS)
    parser.add_argument("--tools", nargs="+", default=ALL_TOOLS, choices=ALL_TOOLS)
    parser.add_argument("--eval-args", nargs="*", default=[], metavar='EVAL[@TOOL]="ARGS"',
                        help="arguments for an eval's run.py (sizes, runs), e.g. "
                        "lse=\"-n 1000 10000\"; with @TOOL, for that tool only "
                        "(ba@pytorch=\"--max 1\")")
    parser.add_argument("--min-runs", type=int, default=3,
                        help="at least this many runs (3: a median of two after the first)")
    parser.add_argument("--min-seconds", type=float, default=1.0,
                        help="each evaluation repeats until this long (GradBench's default 1)")
    parser.add_argument("--timeout", type=float, default=1800,
                        help="seconds one eval may run against one tool")
    parser.add_argument("--eval-python", default=sys.executable,
                        help="the Python that runs GradBench's evals (needs numpy, scipy, "
                        "pydantic and dataclasses-json)")
    parser.add_argument("--tool-path", nargs="*", default=[],
                        help="folders to append to the Python path (e.g. one holding "
                        "dataclasses-json, which GradBench's PyTorch lstm and ht modules import)")
    parser.add_argument("--statistic", choices=["median", "min"], default="median",
                        help="of the runs after the first")
    parser.add_argument("-o", "--output", type=Path, help="also write the report here")
    parser.add_argument("--raw", type=Path, help="write every timing here as JSON")
    parser.add_argument("--from-raw", nargs="+", type=Path, metavar="RAW",
                        help="report from earlier runs' --raw files instead of running (an eval "
                        "in a later file replaces the same eval in earlier ones)")
    parser.add_argument("--log-dir", type=Path, help="transcripts and stderr (default: temp)")
    args = parser.parse_args()
    if args.from_raw:
        results, header = load_raw(args.from_raw)
        command = " ".join(shlex.quote(a) for a in ["python"] + sys.argv)
        header = [f"Report of {len(args.from_raw)} run(s), assembled by `{command}` at "
                  f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC (an eval "
                  "in a later run replaces it in an earlier one). The runs:", ""] + header
    elif args.gradbench is None:
        parser.error("--gradbench is required to run the evals (or --from-raw to report)")
    else:
        results, header = run_all(args)
        if args.raw:
            args.raw.write_text(json.dumps({
                "header": header,
                "results": {f"{e}/{t}": r for (e, t), r in results.items()}}))
    text = report(results, header, args.statistic)
    print(text)
    if args.output:
        args.output.write_text(text + "\n")


if __name__ == "__main__":
    main()
