# Interruptible engines.  Between work items, the calling thread (slot 0 of
# the pool) runs Python's signal handlers every SIGNAL_PERIOD seconds, briefly
# holding the GIL; if a handler raises (Ctrl-C:
# KeyboardInterrupt), every thread skips its remaining items and the exception
# is raised when the engine returns.  Outputs are then partially written.
# Calls from other threads skip the checks: only the main thread runs handlers.

import threading

SIGNAL_PERIOD = 0.05


cdef Signals signals_for_this_call():
    cdef Signals signals
    signals.enabled = threading.current_thread() is threading.main_thread()
    signals.period = SIGNAL_PERIOD
    signals.next_check = convt_seconds() + SIGNAL_PERIOD
    signals.stop.raised = 0
    signals.kind = signals.value = signals.traceback = NULL
    return signals


cdef void run_signal_handlers(Signals* signals) noexcept with gil:
    if PyErr_CheckSignals() != 0:
        PyErr_Fetch(&signals.kind, &signals.value, &signals.traceback)
        convt_raise_stop(&signals.stop)


cdef inline bint stopped(Signals* signals, int slot) noexcept nogil:
    """Whether the engine must stop; the caller (slot 0) runs the signal handlers
    when due."""
    if convt_stop_raised(&signals.stop):
        return True
    if signals.enabled and slot == 0 and convt_seconds() >= signals.next_check:
        run_signal_handlers(signals)
        signals.next_check = convt_seconds() + signals.period
    return convt_stop_raised(&signals.stop)


cdef int raise_if_stopped(Signals* signals) except -1:
    """Raise, with the GIL held, the exception a signal handler raised during the engine."""
    if convt_stop_raised(&signals.stop):
        PyErr_Restore(signals.kind, signals.value, signals.traceback)
        return -1
    return 0


def _set_signal_period(double seconds):
    """Tests only: how often the engines run signal handlers."""
    global SIGNAL_PERIOD
    SIGNAL_PERIOD = seconds
