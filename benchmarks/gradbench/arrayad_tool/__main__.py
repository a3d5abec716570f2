"""``python -m arrayad_tool [--jit]``: the arrayad tool, speaking GradBench's protocol.

Messages arrive one JSON object a line on stdin; every message gets one response line on stdout
with its ``id``. ``define`` answers whether a module of this package implements the eval;
``evaluate`` runs the function ``min_runs`` times or until ``min_seconds`` have passed, whichever
is longer, one ``evaluate`` timing per run (the conversion from and to JSON is not timed). Other
kinds (``start``, ``analysis``, ...) are acknowledged.
"""

import argparse
import importlib
import json
import sys
import time
import traceback

import arrayad as ad

from . import EVALS


class Tool:
    def __init__(self, use_jit=False):
        self.use_jit = use_jit
        self.modules = {}  # eval name -> {function name: (entry, callable)}

    def define(self, module):
        if module not in EVALS:
            return {"success": False, "error": f"arrayad has no implementation of {module!r}"}
        functions = importlib.import_module(f"{__package__}.{module}").FUNCTIONS
        self.modules[module] = {
            name: (
                entry,
                ad.jit(entry.staged or entry.compute, static_argnums=entry.static_argnums)
                if self.use_jit
                else entry.compute,
            )
            for name, entry in functions.items()
        }
        return {"success": True}

    def evaluate(self, module, function, input):
        entry, compute = self.modules[module][function]
        args = entry.prepare(input)
        runs = input.get("min_runs", 1) if isinstance(input, dict) else 1
        seconds = input.get("min_seconds", 0) if isinstance(input, dict) else 0
        timings = []
        elapsed = 0
        while len(timings) < runs or elapsed < seconds:
            start = time.perf_counter_ns()
            result = compute(*args)  # NumPy in, NumPy out: the work is done when it returns
            end = time.perf_counter_ns()
            timings.append({"name": "evaluate", "nanoseconds": end - start})
            elapsed += (end - start) / 1e9
        return {"success": True, "output": entry.post(result), "timings": timings}

    def respond(self, message):
        response = {"id": message["id"]}
        kind = message.get("kind")
        try:
            if kind == "start":
                response["tool"] = "arrayad-jit" if self.use_jit else "arrayad"
            elif kind == "define":
                response.update(self.define(message["module"]))
            elif kind == "evaluate":
                response.update(
                    self.evaluate(message["module"], message["function"], message["input"])
                )
        except Exception as error:  # reported to the eval, which records the failure
            response.update(success=False, error="".join(traceback.format_exception(error)))
        return response


def main(argv=None, stdin=sys.stdin, stdout=sys.stdout):
    parser = argparse.ArgumentParser(prog="python -m arrayad_tool")
    parser.add_argument("--jit", action="store_true", help="wrap every function with arrayad.jit")
    args = parser.parse_args(argv)
    tool = Tool(use_jit=args.jit)
    for line in stdin:
        if line.strip():
            print(json.dumps(tool.respond(json.loads(line))), file=stdout, flush=True)


if __name__ == "__main__":
    try:
        main()
    except (BrokenPipeError, KeyboardInterrupt):
        pass
