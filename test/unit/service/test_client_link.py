"""Whether a request's client still waits, read from the service's end of nginx's connection
(``edge.client_link``): a peek that never waits, on the plain socket and on gevent's; and, on
gevent's, a call waiting under ``watching`` cut off when the peer closes."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Callable

import gevent
import gevent.socket
import pytest
from sagemaker_tfs.service.edge.client_link import still_wanted_by
from sagemaker_tfs.service.routing.model_servers import CallCut, always_wanted

Pair = Callable[[], tuple[socket.socket, socket.socket]]
PAIRS: dict[str, Pair] = {"stdlib": socket.socketpair, "gevent": gevent.socket.socketpair}


@pytest.mark.parametrize("make_pair", PAIRS.values(), ids=PAIRS.keys())
def test_open_until_the_peer_closes(make_pair: Pair) -> None:
    service_side, nginx_side = make_pair()
    with service_side:
        still_wanted = still_wanted_by({"gunicorn.socket": service_side})
        with gevent.Timeout(2):  # a peek that waited for data would hang here
            assert still_wanted() and still_wanted()
            nginx_side.close()
            assert not still_wanted()


def test_data_waiting_is_left_to_be_read() -> None:
    service_side, nginx_side = socket.socketpair()
    with service_side, nginx_side:
        nginx_side.sendall(b"x")
        assert still_wanted_by({"gunicorn.socket": service_side})()
        assert service_side.recv(10) == b"x"


def test_a_reset_connection_is_gone() -> None:
    service_side, nginx_side = socket.socketpair()
    with service_side:
        still_wanted = still_wanted_by({"gunicorn.socket": service_side})
        service_side.shutdown(socket.SHUT_RD)
        nginx_side.close()
        assert not still_wanted()


def test_without_a_socket_or_with_a_timeout_it_is_always_wanted() -> None:
    assert still_wanted_by({}) is always_wanted
    service_side, nginx_side = socket.socketpair()
    with service_side, nginx_side:
        service_side.settimeout(5)
        assert still_wanted_by({"gunicorn.socket": service_side}) is always_wanted


MONKEY_PATCHED = """
from gevent import monkey

monkey.patch_all()
import socket

from sagemaker_tfs.service.edge.client_link import still_wanted_by
from sagemaker_tfs.service.routing.model_servers import always_wanted

service_side, nginx_side = socket.socketpair()
still_wanted = still_wanted_by({"gunicorn.socket": service_side})
assert still_wanted is not always_wanted
assert still_wanted()
nginx_side.close()
assert not still_wanted()
"""


def test_it_looks_at_the_connection_in_a_gevent_worker() -> None:
    """As gunicorn's gevent worker runs it: the socket module patched (``socket.SocketType``
    is then gevent's class, which a check of the type must not rely on)."""
    subprocess.run([sys.executable, "-c", MONKEY_PATCHED], check=True, timeout=60)


def test_a_watched_wait_is_cut_off_when_the_peer_closes() -> None:
    service_side, nginx_side = gevent.socket.socketpair()
    with service_side:
        link = still_wanted_by({"gunicorn.socket": service_side})
        gevent.spawn_later(0.05, nginx_side.close)
        with gevent.Timeout(5), pytest.raises(CallCut), link.watching():
            gevent.sleep(10)  # a call waiting on its model server


def test_data_or_a_close_after_the_call_cut_nothing() -> None:
    """Readable with data (not a close), the wait goes on; once the call is over, a close
    raises nothing into what the greenlet does next."""
    service_side, nginx_side = gevent.socket.socketpair()
    with service_side:
        link = still_wanted_by({"gunicorn.socket": service_side})
        gevent.spawn_later(0.05, nginx_side.sendall, b"x")
        with link.watching():
            gevent.sleep(0.2)
        nginx_side.close()
        gevent.sleep(0.2)
        assert service_side.recv(10) == b"x"


def test_a_plain_socket_is_not_watched() -> None:
    """A worker without gevent's loop: only the checks between attempts."""
    service_side, nginx_side = socket.socketpair()
    with service_side:
        link = still_wanted_by({"gunicorn.socket": service_side})
        nginx_side.close()
        with link.watching():
            time.sleep(0.1)
        assert not link()
