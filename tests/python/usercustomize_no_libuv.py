"""usercustomize for torchrun on Debian's PyTorch 2, which is built without libuv: its
TCPStore asks for libuv unless told otherwise, and torchrun's rendezvous does not tell it
(USE_LIBUV=0 reaches init_process_group only). The tests install this as a usercustomize
(PYTHONUSERBASE) so that torchrun runs as itself; it changes nothing else, and nothing
without USE_LIBUV=0."""
import os

if os.environ.get("USE_LIBUV") == "0":
    try:
        import torch.distributed as _dist
        import torch.distributed.rendezvous as _rendezvous

        class TCPStore(_dist.TCPStore):
            def __init__(self, *args, **kwargs):
                kwargs.setdefault("use_libuv", False)
                super().__init__(*args, **kwargs)

        _dist.TCPStore = _rendezvous.TCPStore = TCPStore
    except Exception:  # no torch.distributed: nothing to change
        pass
