# The demo's session: the reader has a one-second sound, ~/ring.wav (8 kHz, 8-bit mono WAV).
python3 - "$HOME/ring.wav" <<'PY'
import math, struct, sys
rate = 8000
data = bytes(int(128 + 60 * math.sin(2 * math.pi * 880 * i / rate)) for i in range(rate))
fmt = struct.pack('<HHIIHH', 1, 1, rate, rate, 1, 8)
body = b'WAVE' + b'fmt ' + struct.pack('<I', len(fmt)) + fmt + b'data' + struct.pack('<I', len(data)) + data
open(sys.argv[1], 'wb').write(b'RIFF' + struct.pack('<I', len(body)) + body)
PY
