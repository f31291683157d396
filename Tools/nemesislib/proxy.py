"""The network between the devices and the server: a loopback TCP proxy that can be cut.

Every device reaches the server through it. Up, it forwards each connection to one of the
servers (round robin: two PostgreSQL-backed instances share the load as behind a balancer);
`drop` refuses new connections (accepted, then closed at once, as a reset link) and `stall`
accepts them and sends nothing either way until the network comes back (a black hole: the
client's timeouts must fire). Cutting ends every open connection. It reads the status line of
every answer it forwards, so that a 5xx from any server is seen whoever asked.
"""
import re
import select
import socket
import threading

STATUS = re.compile(rb"HTTP/1\.[01] (\d{3})")


class Proxy:
    def __init__(self, backends):
        self.backends = list(backends)  # ports of the servers
        self.mode = "up"
        self.statuses = []  # (status, first bytes of the answer) of every answer seen
        self._lock = threading.Lock()
        self._next = 0
        self._open = set()
        self._stalled = []
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(128)
        self.port = self._listener.getsockname()[1]
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def set_mode(self, mode):
        with self._lock:
            self.mode = mode
            if mode == "up":
                doomed, self._stalled = self._stalled, []
            else:
                doomed, self._open = list(self._open), set()
        for sock in doomed:
            _close(sock)

    def server_errors(self):
        with self._lock:
            return [(status, head) for status, head in self.statuses if status >= 500 and status != 503]

    def close(self):
        self._closed = True
        _close(self._listener)
        self.set_mode("drop")

    def _accept(self):
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                mode = self.mode
                if mode == "stall":
                    self._stalled.append(client)
                    continue
                port = self.backends[self._next % len(self.backends)]
                self._next += 1
            if mode == "drop":
                _close(client)
                continue
            threading.Thread(target=self._pump, args=(client, port), daemon=True).start()

    def _pump(self, client, port):
        try:
            server = socket.create_connection(("127.0.0.1", port), timeout=5)
        except OSError:
            _close(client)  # the server is down: the client sees its connection end
            return
        with self._lock:
            if self.mode != "up":
                _close(client)
                _close(server)
                return
            self._open.update((client, server))
        try:
            server.settimeout(None)
            peers = {client: server, server: client}
            while True:
                ready, _, _ = select.select(list(peers), [], [], 1.0)
                for sock in ready:
                    data = sock.recv(65536)
                    if not data:
                        return
                    if sock is server:
                        for match in STATUS.finditer(data):
                            with self._lock:
                                self.statuses.append((int(match.group(1)), data[match.start() : match.start() + 400]))
                    peers[sock].sendall(data)
        except (OSError, ValueError):
            return
        finally:
            with self._lock:
                self._open.discard(client)
                self._open.discard(server)
            _close(client)
            _close(server)


def _close(sock):
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass
