"""torchft's reconfigurable process group on the "coll" backend.

    from torch_coll_torchft import ProcessGroupColl
    manager = torchft.Manager(pg=ProcessGroupColl(timeout=timedelta(seconds=10)), ...)

torchft (PyPI's torchft, 0.2.0 tested) remakes its replicas' group at every new quorum:
Manager calls configure(store_addr, ...) with a fresh store prefix, and the group aborts the
old backend and makes a new one there, collective over the quorum's replicas. This class is
torchft's own ProcessGroupGloo with torch_coll's backend in it: torch_coll.ProcessGroupColl
made on the quorum's store (libcoll's rendezvous and liveness lease live there) and
registered on a c10d ProcessGroup for the CPU (and CUDA, where libcoll has its device path).
On top of what torchft's wrapper does, errored() reports a communicator that failed while no
call was running (a peer lost, the store gone), so that Manager.should_commit() does not
commit that step, and set_timeout() reaches the live backend too.

This module imports torchft; `import torch_coll` alone never does."""
from datetime import timedelta
from typing import Optional

import torch
import torch_coll
from torch.distributed import ProcessGroup as _C10dProcessGroup

try:
    from torchft.process_group import ProcessGroupWrapper as _TorchftWrapper
except ImportError as missing:  # a clear message: the rest of torch_coll does not need it
    raise ImportError(
        "torch_coll_torchft needs torchft (pip install torchft==0.2.0, the release "
        "torch_coll's tests pin): " + str(missing)) from missing

__all__ = ["ProcessGroupColl"]

_CUSTOM = _C10dProcessGroup.BackendType.CUSTOM


class ProcessGroupColl(_TorchftWrapper):
    """A reconfigurable torchft ProcessGroup whose collectives run on libcoll.

    timeout: each collective's deadline and the group's rendezvous deadline at configure()
    (torchft's ProcessGroupGloo takes the same argument). A peer killed mid-call fails the
    call at once (its connections break; the Work raises, torchft's Manager records the
    error and skips the step); a peer that hangs, at the timeout. Known limit: if the
    replica that hangs is the one whose TCPStore holds the group (the quorum's primary),
    the survivors' call does not return (docs/pytorch.md, "torchft")."""

    def _create_pg(self, store, rank: int, world_size: int) -> _C10dProcessGroup:
        backend = torch_coll.ProcessGroupColl(store, rank, world_size, self._timeout)
        group = _C10dProcessGroup(store, rank, world_size)
        group._set_default_backend(_CUSTOM)
        group._register_backend(torch.device("cpu"), _CUSTOM, backend)
        if torch_coll.features()["cuda"] and torch.cuda.is_available():
            group._register_backend(torch.device("cuda"), _CUSTOM, backend)
        self._backend = backend
        return group

    def getBackendName(self) -> str:
        return "torchft-coll"

    def abort(self, errored: bool = True) -> None:
        # torchft's wrapper calls the c10d group's abort() (every backend's: coll_comm_abort,
        # pending calls fail at once) and drops the group; the backend goes with it.
        super().abort(errored=errored)
        self._backend = None

    def shutdown(self) -> None:
        # torchft's wrapper only drops the group: without an abort its destructor would let
        # running calls finish (up to the group's timeout, at most 5 s) first.
        self.abort(errored=False)

    def errored(self) -> Optional[Exception]:
        # get_error() is PyTorch 2.14's (torch_coll serves it there); before, a failure
        # reaches torchft only through the failed call's Work.
        get_error = getattr(getattr(self, "_backend", None), "get_error", None)
        if get_error is None:
            return None
        error = get_error()
        if error.name == "SUCCESS":
            return None
        return RuntimeError(f"coll: the group's communicator failed ({error.name})")

    def set_timeout(self, timeout: timedelta) -> None:
        super().set_timeout(timeout)
        backend = getattr(self, "_backend", None)
        if backend is not None and hasattr(backend, "set_timeout"):  # 2.14+
            backend.set_timeout(timeout)
