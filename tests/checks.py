"""The Python tests' counters: check() and raises() count what passed and what
failed, result() prints the "RESULT passed failed" line that tests/run.sh reads
and gives the exit status. A test script imports this module from tests/."""

passed = failed = 0
echo_passes = False  # print "ok   <what>" for each check that passed, too


def check(ok, msg):
    global passed, failed
    if ok:
        passed += 1
        if echo_passes:
            print("ok   " + msg)
    else:
        failed += 1
        print("FAIL: " + msg)


def raises(fn, kind, msg, want=None):
    """fn() raises kind, and its message contains want (when given)"""
    try:
        fn()
    except kind as e:
        check(want is None or want in str(e), "%s: message %r lacks %r" % (msg, str(e), want))
        return
    except Exception as e:  # noqa: BLE001
        check(False, "%s: raised %s (%s), not %s" % (msg, type(e).__name__, e, kind.__name__))
        return
    check(False, "%s: no exception" % msg)


def result():
    """print the RESULT line; the exit status: 1 if a check failed"""
    print("RESULT %d %d" % (passed, failed))
    return 1 if failed else 0
