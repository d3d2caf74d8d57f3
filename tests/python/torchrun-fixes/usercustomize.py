"""Not part of autobatch: the test environment's fixes for two bugs of Debian's PyTorch builds
that keep torchrun (python -m torch.distributed.run) from starting any worker, put on
PYTHONPATH by the tests that run torchrun, so that it runs there as it runs from upstream's:
- 1.13 under Python 3.11 (Debian 12): Std.from_str finds no member for 0 (iterating an IntFlag
  no longer yields 0 or aliases), and start_processes fails with "'NoneType' object has no
  attribute 'get'" (fixed upstream in PyTorch 2.0).
- 2.6 and 2.14 (Debian 13, unstable) are built without libuv, yet TCPStore's default asks for
  it: torchrun's rendezvous fails "use_libuv was requested but PyTorch was built without libuv
  support, run with USE_LIBUV=0", and USE_LIBUV=0 reaches only the env:// rendezvous. With
  USE_LIBUV=0 set, TCPStore's default follows it.
Each fix is applied when the module it fixes is imported, and only where the bug is there.
A usercustomize, which Python runs after the sitecustomize: it shadows none (the probe's step
hook, Debian's), so it need not run one itself.
"""
import importlib.abc
import importlib.util
import os
import re
import sys


def _fix_std(api):
    std = api.Std
    if len(list(std)) == 4:
        return

    def to_std(value):
        return std(int(value))

    def from_str(cls, vm):
        if re.fullmatch(r"[0-3]", vm):
            return to_std(vm)
        if re.fullmatch(r"([0-9]+:[0-3],)*[0-9]+:[0-3]", vm):
            return {int(i): to_std(v) for i, v in (m.split(":") for m in vm.split(","))}
        raise ValueError(f"{vm} is not a std stream setting")

    std.from_str = classmethod(from_str)


def _fix_tcpstore(dist):
    if os.environ.get("USE_LIBUV") != "0" or not hasattr(dist, "TCPStore"):
        return
    base = dist.TCPStore
    if "use_libuv" not in (base.__init__.__doc__ or ""):
        return  # before PyTorch 2.4: no libuv to ask for

    class TCPStore(base):
        def __init__(self, *args, **kwargs):
            kwargs.setdefault("use_libuv", False)
            super().__init__(*args, **kwargs)

    # and in its modules that took the name while it was imported (rendezvous)
    for name, module in list(sys.modules.items()):
        if name.startswith("torch.distributed") and getattr(module, "TCPStore", None) is base:
            module.TCPStore = TCPStore


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs FIX on module NAME once it has been imported."""

    def __init__(self, name, fix):
        self.name, self.fix = name, fix

    def find_spec(self, name, path, target=None):
        if name != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        run, fix = spec.loader.exec_module, self.fix

        def exec_module(module):
            run(module)
            fix(module)

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _AfterImport("torch.distributed.elastic.multiprocessing.api", _fix_std))
sys.meta_path.insert(0, _AfterImport("torch.distributed", _fix_tcpstore))
