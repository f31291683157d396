/// Lowercase hexadecimal, as ids, digests, token hashes and the key ids of encrypted suites are
/// written.
package enum Hex {
    private static let digits = Array("0123456789abcdef".utf8)

    package static func string(_ bytes: some Sequence<UInt8>) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.underestimatedCount * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 15)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// `bytes` in lowercase hex, written straight into the string's storage (key ids are made for
    /// every entry sealed or opened).
    package static func string(_ bytes: UnsafeRawBufferPointer) -> String {
        String(unsafeUninitializedCapacity: bytes.count * 2) { out in
            for (index, byte) in bytes.enumerated() {
                out[2 * index] = digits[Int(byte >> 4)]
                out[2 * index + 1] = digits[Int(byte & 15)]
            }
            return bytes.count * 2
        }
    }
}
