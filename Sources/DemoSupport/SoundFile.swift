import Foundation

/// A notification sound as iOS accepts it: an aiff, wav, caf or mp3 file whose bytes match its
/// name, and (where the header tells the duration: WAV and AIFF) no longer than 30 seconds.
///
/// Shared by `demo-host-app` (before it copies a chosen sound) and `demo-notification-service`
/// (before it names the sound in a payload).
public struct SoundFile: Sendable {
    public enum Kind: String, Sendable {
        case wav = "WAV"
        case aiff = "AIFF"
        case caf = "CAF"
        case mp3 = "MP3"
    }

    /// The longest sound iOS plays for a notification.
    public static let maximumDuration: Double = 30

    /// The file name, e.g. `ring.wav`.
    public let name: String
    public let kind: Kind
    /// The duration in seconds, where the header tells it (WAV, AIFF).
    public let duration: Double?

    /// Checks that `name` can name a sound in `Library/Sounds`: a plain file name ending in
    /// .aiff, .aif, .wav, .caf or .mp3. Returns the kind its extension promises.
    public static func kind(forName name: String) throws(SoundError) -> Kind {
        if name.isEmpty || name.hasPrefix(".") || name.contains("/") || name.utf8.contains(0) {
            throw SoundError("'\(name)' is not a plain file name")
        }
        switch (name as NSString).pathExtension.lowercased() {
        case "wav": return .wav
        case "aiff", "aif": return .aiff
        case "caf": return .caf
        case "mp3": return .mp3
        default: throw SoundError("'\(name)' does not end in .aiff, .aif, .wav, .caf or .mp3")
        }
    }

    /// Checks the file at `path` as the sound `name`: a regular file whose bytes are of the kind
    /// `name` promises, and not longer than 30 seconds.
    public init(name: String, path: String) throws(SoundError) {
        let kind = try Self.kind(forName: name)
        var st = stat()
        guard stat(path, &st) == 0 else {
            throw SoundError("\(path): \(String(cString: strerror(errno)))")
        }
        guard st.st_mode & S_IFMT == S_IFREG else { throw SoundError("\(path) is not a regular file") }
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw SoundError("\(path) cannot be read")
        }
        defer { try? handle.close() }
        let reader = ChunkReader(handle: handle, size: UInt64(st.st_size))
        let head = reader.bytes(at: 0, count: 12)
        let duration: Double?
        switch kind {
        case .wav:
            guard head.count == 12, head.ascii(0, 4) == "RIFF", head.ascii(8, 4) == "WAVE" else {
                throw SoundError("\(path) is not a WAV file (no RIFF/WAVE header)")
            }
            duration = try Self.wavDuration(reader, path: path)
        case .aiff:
            guard head.count == 12, head.ascii(0, 4) == "FORM", ["AIFF", "AIFC"].contains(head.ascii(8, 4)) else {
                throw SoundError("\(path) is not an AIFF file (no FORM/AIFF or AIFC header)")
            }
            duration = try Self.aiffDuration(reader, path: path)
        case .caf:
            guard head.count >= 4, head.ascii(0, 4) == "caff" else {
                throw SoundError("\(path) is not a CAF file (no caff header)")
            }
            duration = nil
        case .mp3:
            let isID3 = head.count >= 3 && head.ascii(0, 3) == "ID3"
            let isFrame = head.count >= 2 && head[0] == 0xFF && head[1] & 0xE0 == 0xE0
            guard isID3 || isFrame else {
                throw SoundError("\(path) is not an MP3 file (no ID3 tag or MPEG frame)")
            }
            duration = nil
        }
        if let duration, duration > Self.maximumDuration {
            throw SoundError(
                "\(path) lasts \(String(format: "%.1f", duration)) s; a notification sound may last at most 30 s"
            )
        }
        self.name = name
        self.kind = kind
        self.duration = duration
    }

    /// WAV: the `fmt ` chunk's byte rate and the `data` chunk's size (little-endian chunks).
    private static func wavDuration(_ reader: ChunkReader, path: String) throws(SoundError) -> Double {
        var byteRate: UInt32?
        var dataSize: UInt64?
        for chunk in reader.chunks(from: 12, bigEndian: false) {
            if chunk.id == "fmt " {
                let body = reader.bytes(at: chunk.offset, count: 16)
                guard body.count == 16 else { break }
                byteRate = body.uint32(8, bigEndian: false)
            } else if chunk.id == "data" {
                // Trust the header only as far as the file goes.
                dataSize = min(chunk.size, reader.size - chunk.offset)
            }
            if byteRate != nil, dataSize != nil { break }
        }
        guard let byteRate, byteRate > 0 else { throw SoundError("\(path): the WAV file has no valid fmt chunk") }
        guard let dataSize else { throw SoundError("\(path): the WAV file has no data chunk") }
        return Double(dataSize) / Double(byteRate)
    }

    /// AIFF/AIFC: the `COMM` chunk's frame count and 80-bit extended sample rate (big-endian chunks).
    private static func aiffDuration(_ reader: ChunkReader, path: String) throws(SoundError) -> Double {
        for chunk in reader.chunks(from: 12, bigEndian: true) where chunk.id == "COMM" {
            let body = reader.bytes(at: chunk.offset, count: 18)
            guard body.count == 18 else { break }
            let frames = body.uint32(2, bigEndian: true)
            let rate = extended80(Array(body[8..<18]))
            guard rate.isFinite, rate > 0 else { break }
            return Double(frames) / rate
        }
        throw SoundError("\(path): the AIFF file has no valid COMM chunk")
    }

    /// An IEEE 754 80-bit extended number (AIFF's sample rate): sign, 15-bit exponent, 64-bit
    /// mantissa with an explicit integer bit.
    static func extended80(_ bytes: [UInt8]) -> Double {
        let signAndExponent = UInt16(bytes[0]) << 8 | UInt16(bytes[1])
        let mantissa = bytes[2..<10].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        let exponent = Int(signAndExponent & 0x7FFF)
        if exponent == 0 && mantissa == 0 { return 0 }
        if exponent == 0x7FFF { return .nan }
        let value = Double(mantissa) * pow(2, Double(exponent - 16383 - 63))
        return signAndExponent & 0x8000 != 0 ? -value : value
    }
}

/// Why a file is not a usable notification sound, in one line.
public struct SoundError: Error, Sendable, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}

/// Reads a RIFF-style file (WAV, AIFF) chunk by chunk, seeking over the bodies.
private struct ChunkReader {
    let handle: FileHandle
    let size: UInt64

    func bytes(at offset: UInt64, count: Int) -> [UInt8] {
        guard offset < size else { return [] }
        do {
            try handle.seek(toOffset: offset)
            return Array(try handle.read(upToCount: count) ?? Data())
        } catch {
            return []
        }
    }

    struct Chunk {
        var id: String
        /// Where the body starts.
        var offset: UInt64
        /// The body's size as the header claims it.
        var size: UInt64
    }

    /// The chunks from `start` on (at most 256, so that a damaged file cannot keep us long).
    func chunks(from start: UInt64, bigEndian: Bool) -> [Chunk] {
        var chunks: [Chunk] = []
        var offset = start
        while chunks.count < 256, offset + 8 <= size {
            let header = bytes(at: offset, count: 8)
            guard header.count == 8 else { break }
            let chunk = Chunk(id: header.ascii(0, 4), offset: offset + 8, size: UInt64(header.uint32(4, bigEndian: bigEndian)))
            chunks.append(chunk)
            offset = chunk.offset + chunk.size + (chunk.size & 1)  // bodies are padded to even sizes
        }
        return chunks
    }
}

extension [UInt8] {
    fileprivate func ascii(_ start: Int, _ count: Int) -> String {
        guard start + count <= self.count else { return "" }
        return String(decoding: self[start..<start + count], as: UTF8.self)
    }

    fileprivate func uint32(_ start: Int, bigEndian: Bool) -> UInt32 {
        let bytes = self[start..<start + 4].map(UInt32.init)
        return bigEndian
            ? bytes[0] << 24 | bytes[1] << 16 | bytes[2] << 8 | bytes[3]
            : bytes[3] << 24 | bytes[2] << 16 | bytes[1] << 8 | bytes[0]
    }
}
