import Foundation

/// Sound files, generated: real headers and real sample data (8-bit mono tones, 8 kHz).
enum Fixture {
    static let rate = 8000

    /// A sine tone as a WAV file (RIFF/WAVE, PCM).
    static func wav(seconds: Double, rate: Int = rate) -> Data {
        let samples = tone(seconds: seconds, rate: rate).map { UInt8(Int($0) + 128) }
        var fmt = Data()
        fmt.le16(1)
        fmt.le16(1)
        fmt.le32(UInt32(rate))
        fmt.le32(UInt32(rate))
        fmt.le16(1)
        fmt.le16(8)
        var body = Data("WAVE".utf8)
        body += Data("LIST".utf8)
        body.le32(4)
        body += Data("INFO".utf8)  // a chunk to skip
        body += Data("fmt ".utf8)
        body.le32(UInt32(fmt.count))
        body += fmt
        body += Data("data".utf8)
        body.le32(UInt32(samples.count))
        body += samples
        if samples.count % 2 == 1 { body.append(0) }
        var file = Data("RIFF".utf8)
        file.le32(UInt32(body.count))
        return file + body
    }

    /// A sine tone as an AIFF file (FORM/AIFF), or AIFF-C (FORM/AIFC, uncompressed).
    static func aiff(seconds: Double, rate: Int = rate, compressed: Bool = false) -> Data {
        let samples = tone(seconds: seconds, rate: rate).map { UInt8(bitPattern: $0) }
        var comm = Data()
        comm.be16(1)
        comm.be32(UInt32(samples.count))
        comm.be16(8)
        comm += extended80(rate)
        if compressed {
            comm += Data("NONE".utf8)
            comm += [0, 0]
        }
        var body = Data((compressed ? "AIFC" : "AIFF").utf8)
        if compressed {
            body += Data("FVER".utf8)
            body.be32(4)
            body.be32(0xA280_5140)
        }
        body += Data("COMM".utf8)
        body.be32(UInt32(comm.count))
        body += comm
        body += Data("SSND".utf8)
        body.be32(UInt32(8 + samples.count))
        body.be32(0)
        body.be32(0)
        body += samples
        if samples.count % 2 == 1 { body.append(0) }
        var file = Data("FORM".utf8)
        file.be32(UInt32(body.count))
        return file + body
    }

    /// The start of a CAF file (the duration is not checked for CAF).
    static let caf = Data("caff".utf8) + Data([0, 1, 0, 0]) + Data("desc".utf8) + Data(repeating: 0, count: 40)
    /// An MP3 file with an ID3v2 tag, and one that starts with an MPEG frame.
    static let mp3WithTag = Data("ID3".utf8) + Data([3, 0, 0, 0, 0, 0, 0]) + Data([0xFF, 0xFB, 0x90, 0x64]) + Data(repeating: 0, count: 413)
    static let mp3Frame = Data([0xFF, 0xFB, 0x90, 0x64]) + Data(repeating: 0, count: 413)

    private static func tone(seconds: Double, rate: Int) -> [Int8] {
        (0..<Int(seconds * Double(rate))).map { Int8(60 * sin(2 * Double.pi * 440 * Double($0) / Double(rate))) }
    }

    /// A positive integer as an 80-bit IEEE extended number (AIFF's sample rate).
    static func extended80(_ value: Int) -> Data {
        let bits = Int.bitWidth - value.leadingZeroBitCount
        let exponent = UInt16(16383 + bits - 1)
        let mantissa = UInt64(value) << UInt64(64 - bits)
        var data = Data()
        data.be16(exponent)
        for shift in stride(from: 56, through: 0, by: -8) { data.append(UInt8(truncatingIfNeeded: mantissa >> UInt64(shift))) }
        return data
    }
}

extension Data {
    fileprivate mutating func le16(_ value: UInt16) { append(contentsOf: [UInt8(value & 0xFF), UInt8(value >> 8)]) }
    fileprivate mutating func le32(_ value: UInt32) { for shift in [0, 8, 16, 24] { append(UInt8(truncatingIfNeeded: value >> UInt32(shift))) } }
    fileprivate mutating func be16(_ value: UInt16) { append(contentsOf: [UInt8(value >> 8), UInt8(value & 0xFF)]) }
    fileprivate mutating func be32(_ value: UInt32) { for shift in [24, 16, 8, 0] { append(UInt8(truncatingIfNeeded: value >> UInt32(shift))) } }
}
