"""autobatch's step hook for probe trials: autobatch-probe puts this directory first on each
trial's PYTHONPATH, so Python runs this file at start-up. In a trial it has PyTorch's
optimizer steps reported (autobatch._hook); outside one it does nothing. Either way it then
runs the sitecustomize it shadows (Debian's, a virtualenv's, a site's), as Python would have.
"""
import importlib
import os
import sys


def _chain():
    here = os.path.dirname(os.path.abspath(__file__))
    ours = sys.modules.pop("sitecustomize", None)
    saved = sys.path[:]
    sys.path[:] = [p for p in saved if os.path.abspath(p or os.curdir) != here]
    try:
        importlib.import_module("sitecustomize")
    except ImportError as error:
        if error.name != "sitecustomize":
            raise
    finally:
        sys.path[:] = saved
        if ours is not None:
            sys.modules["sitecustomize"] = ours


if os.environ.get("AUTOBATCH_TRIAL") == "1" and os.environ.get("AUTOBATCH_TRIAL_REPORT"):
    from autobatch import _hook

    _hook.install()
_chain()
