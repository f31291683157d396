import Foundation

/// JSON for the shapes written on every push, straight into bytes: a device's ops and the push's
/// body around them (each op written once), the server's answer (`PushResponse`) and the batch
/// record that keeps it.
///
/// Foundation's `JSONEncoder` builds a tree of boxed values first and took 12% of the embedded
/// server's CPU samples per single-op push; this writer appends in one pass (below 0.1% in the
/// next profile). The output parses to the same JSON as `JSONEncoder`'s (the tests check it);
/// values other than strings, integers and booleans are written by `typedJSON()`.
package struct WireJSON {
    /// The JSON written so far.
    package private(set) var bytes: [UInt8] = []

    package init(capacity: Int = 256) {
        bytes.reserveCapacity(capacity)
    }

    /// `response` as JSON.
    ///
    /// - Throws: `EncodingError` for a date value outside years 0 to 9999 (as `typedJSON()`).
    package static func encode(_ response: PushResponse) throws -> [UInt8] {
        var json = WireJSON(capacity: 96 + response.results.count * 160)
        json.raw("{\"head_rev\":")
        json.integer(response.headRev)
        json.raw(",\"results\":[")
        for (index, result) in response.results.enumerated() {
            if index > 0 { json.raw(",") }
            json.raw("{\"key\":")
            json.string(result.key)
            switch result.status {
            case .applied: json.raw(",\"status\":\"applied\"")
            case .superseded: json.raw(",\"status\":\"superseded\"")
            case .refused: json.raw(",\"status\":\"refused\"")
            }
            if let winner = result.winner {
                json.raw(",\"winner\":")
                try json.entry(winner)
            }
            if let error = result.error {
                json.raw(",\"error\":")
                json.string(error.rawValue)
            }
            if let detail = result.detail {
                json.raw(",\"detail\":")
                json.string(detail)
            }
            json.raw("}")
        }
        json.raw("],\"server_time\":")
        json.string(response.serverTime)
        json.raw("}")
        return json.bytes
    }

    /// `op` as JSON, as `PushOp.encode(to:)` writes it: the bytes a device sends for it, and sizes
    /// its batch by.
    ///
    /// - Throws: `EncodingError` for a date value outside years 0 to 9999 (as `typedJSON()`).
    package static func encode(_ op: PushOp) throws -> [UInt8] {
        var json = WireJSON(capacity: 96 + op.key.utf8.count)
        json.raw("{\"key\":")
        json.string(op.key)
        try json.content(value: op.value, sealed: op.sealed, deleted: op.isDeleted)
        json.raw(",\"hlc\":\"")
        json.integer(op.hlc.rawValue)
        json.raw("\"")
        if let origin = op.origin {
            json.raw(",\"origin\":\"")
            json.integer(origin)
            json.raw("\"")
        }
        json.raw("}")
        return json.bytes
    }

    /// A push's body (`PushRequest`) around ops already written (`encode(_: PushOp)`), in order:
    /// the ops' bytes are copied, not written again.
    package static func pushBody(deviceID: UInt64, batchID: String, encodedOps: [[UInt8]]) -> [UInt8] {
        var json = WireJSON(capacity: 96 + batchID.utf8.count + encodedOps.reduce(0) { $0 + $1.count + 1 })
        json.raw("{\"device_id\":\"")
        json.integer(deviceID)
        json.raw("\",\"batch_id\":")
        json.string(batchID)
        json.raw(",\"ops\":[")
        for (index, op) in encodedOps.enumerated() {
            if index > 0 { json.raw(",") }
            json.bytes += op
        }
        json.raw("]}")
        return json.bytes
    }

    /// An entry as `SyncEntry.encode(to:)` writes it.
    package mutating func entry(_ entry: SyncEntry) throws {
        raw("{\"key\":")
        string(entry.key)
        if let unavailable = entry.unavailable {
            raw(",\"unavailable\":")
            string(unavailable.rawValue)
        } else {
            try content(value: entry.value, sealed: entry.sealed, deleted: entry.isDeleted)
        }
        raw(",\"hlc\":\"")
        integer(entry.hlc.rawValue)
        raw("\",\"origin\":\"")
        integer(entry.origin)
        raw("\"")
        if let rev = entry.rev {
            raw(",\"rev\":")
            integer(rev)
        }
        if let account = entry.account {
            raw(",\"account\":")
            string(account)
        }
        raw("}")
    }

    /// An entry as `JSONEncoder` with `.sortedKeys` writes a `SyncEntry` (or, with `received`, a
    /// `KeyVersion`), byte for byte: the form of the pages, the history and the event stream. The
    /// value is `typedJSON` as stored, copied rather than decoded and written again; with
    /// `unavailable`, the entry says why instead (`typedJSON` and `sealed` are not written).
    package mutating func sortedEntry(
        key: String,
        typedJSON: [UInt8]?,
        sealed: SealedPayload?,
        deleted: Bool,
        stamp: Stamp,
        rev: UInt64?,
        account: String? = nil,
        received: String? = nil,
        unavailable: UnavailableValue? = nil
    ) {
        raw("{")
        if let account {
            raw("\"account\":")
            string(account)
            raw(",")
        }
        raw(deleted ? "\"deleted\":true,\"hlc\":\"" : "\"hlc\":\"")
        integer(stamp.hlc.rawValue)
        raw("\",\"key\":")
        string(key)
        raw(",\"origin\":\"")
        integer(stamp.origin)
        raw("\"")
        if let received {
            raw(",\"received\":")
            string(received)
        }
        if let rev {
            raw(",\"rev\":")
            integer(rev)
        }
        if let unavailable {
            raw(",\"unavailable\":")
            string(unavailable.rawValue)
        } else if let sealed {
            raw(",\"sealed\":{\"box\":")
            string(Data(sealed.box).base64EncodedString())
            raw(",\"epoch\":")
            integer(UInt64(sealed.epoch))
            raw("}")
        } else if let typedJSON {
            raw(",\"value\":")
            bytes += typedJSON
        }
        raw("}")
    }

    /// What an entry or op holds, after its key: a sealed payload (and whether it deletes), a value,
    /// or a deletion.
    private mutating func content(value: PropertyListValue?, sealed: SealedPayload?, deleted: Bool) throws {
        if let sealed {
            raw(",\"sealed\":{\"epoch\":")
            integer(UInt64(sealed.epoch))
            raw(",\"box\":")
            string(Data(sealed.box).base64EncodedString())
            raw("}")
            if deleted { raw(",\"deleted\":true") }
        } else if let value {
            raw(",\"value\":")
            try self.value(value)
        } else {
            raw(",\"deleted\":true")
        }
    }

    /// A value as typed JSON.
    package mutating func value(_ value: PropertyListValue) throws {
        switch value {
        case .string(let text):
            raw("{\"string\":")
            string(text)
            raw("}")
        case .integer(let number):
            raw("{\"integer\":")
            if number < 0 { raw("-") }
            integer(UInt64(number.magnitude))
            raw("}")
        case .bool(let flag):
            raw(flag ? "{\"bool\":true}" : "{\"bool\":false}")
        default:
            bytes += try value.typedJSON()
        }
    }

    /// A string, quoted and escaped as `JSONEncoder` escapes it (quotation mark, reverse solidus,
    /// solidus and control characters).
    package mutating func string(_ text: String) {
        bytes.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): raw("\\\"")
            case UInt8(ascii: "\\"): raw("\\\\")
            case UInt8(ascii: "/"): raw("\\/")
            case 0x0A: raw("\\n")
            case 0x0D: raw("\\r")
            case 0x09: raw("\\t")
            case 0x08: raw("\\b")
            case 0x0C: raw("\\f")
            case 0..<0x20:
                raw("\\u00")
                bytes.append(Self.hexDigits[Int(byte >> 4)])
                bytes.append(Self.hexDigits[Int(byte & 0xF)])
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    /// A non-negative integer in decimal.
    package mutating func integer(_ number: UInt64) {
        guard number >= 10 else { return bytes.append(UInt8(ascii: "0") + UInt8(number)) }
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var rest = number
            var start = 20
            while rest > 0 {
                start -= 1
                digits[start] = UInt8(ascii: "0") + UInt8(rest % 10)
                rest /= 10
            }
            bytes += digits[start...]
        }
    }

    /// Writes JSON punctuation, names and literals (`{"entries":[`) as they are.
    package mutating func raw(_ text: StaticString) {
        text.withUTF8Buffer { bytes += $0 }
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)
}
