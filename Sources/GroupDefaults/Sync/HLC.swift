import Foundation

/// A hybrid logical clock timestamp: 48 bits of milliseconds since 1970 and a 16-bit counter.
///
/// Every write to a suite carries one; within a store they strictly increase across all processes
/// (the last one is kept in the store and advanced under LMDB's writer lock), and sync orders
/// writes to one key on different devices by (HLC, origin), last writer wins. In JSON an HLC is a
/// decimal string, because 64-bit integers do not survive every JSON parser.
public struct HLC: RawRepresentable, Hashable, Comparable, Sendable, CustomStringConvertible {
    public var rawValue: UInt64

    public init(rawValue: UInt64) { self.rawValue = rawValue }

    public init(milliseconds: UInt64, counter: UInt16) {
        rawValue = (milliseconds << 16) | UInt64(counter)
    }

    public static let zero = HLC(rawValue: 0)

    public var milliseconds: UInt64 { rawValue >> 16 }
    public var counter: UInt16 { UInt16(truncatingIfNeeded: rawValue) }

    /// The timestamp for a new local event: the wall clock if it is ahead of `self`, else one tick
    /// after `self` (a counter overflow carries into the milliseconds).
    public func advanced(toWallClock milliseconds: UInt64 = HLC.wallClockMilliseconds()) -> HLC {
        let wall = HLC(milliseconds: milliseconds, counter: 0)
        return wall > self ? wall : HLC(rawValue: rawValue &+ 1)
    }

    /// The wall clock, in milliseconds since 1970.
    public static func wallClockMilliseconds() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return UInt64(ts.tv_sec) * 1000 + UInt64(ts.tv_nsec) / 1_000_000
    }

    public static func < (lhs: HLC, rhs: HLC) -> Bool { lhs.rawValue < rhs.rawValue }

    public var description: String { String(rawValue) }
}

extension HLC: Codable {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let raw = UInt64(text) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "an HLC is a decimal string of an unsigned 64-bit number, got \(text)")
        }
        self.init(rawValue: raw)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(String(rawValue))
    }
}

/// When and where a value or a removal was written: its HLC and the origin (store) id.
/// Sync compares stamps to decide which of two writes to one key wins.
public struct Stamp: Hashable, Comparable, Sendable {
    public var hlc: HLC
    public var origin: UInt64

    public init(hlc: HLC, origin: UInt64) {
        self.hlc = hlc
        self.origin = origin
    }

    public static func < (lhs: Stamp, rhs: Stamp) -> Bool {
        (lhs.hlc, lhs.origin) < (rhs.hlc, rhs.origin)
    }
}
