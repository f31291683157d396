import Foundation

/// A hybrid logical clock timestamp: 48 bits of milliseconds since 1970 and a 16-bit counter.
///
/// Every write to a suite carries one; within a store they strictly increase across all processes
/// (the last one is kept in the store and advanced under LMDB's writer lock), and sync orders
/// writes to one key on different devices by (HLC, origin), last writer wins. In JSON an HLC is a
/// decimal string, because 64-bit integers do not survive every JSON parser.
public struct HLC: RawRepresentable, Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The packed timestamp: the milliseconds in the high 48 bits, the counter in the low 16. Its
    /// decimal form is the HLC on the wire, and it orders HLCs.
    public var rawValue: UInt64

    public init(rawValue: UInt64) { self.rawValue = rawValue }

    /// A timestamp from its two parts.
    ///
    /// - Parameters:
    ///   - milliseconds: Milliseconds since 1970; only the low 48 bits are kept.
    ///   - counter: The logical part, which orders events within one millisecond.
    public init(milliseconds: UInt64, counter: UInt16) {
        rawValue = (milliseconds << 16) | UInt64(counter)
    }

    /// The smallest timestamp (millisecond 0, counter 0), earlier than any write.
    public static let zero = HLC(rawValue: 0)

    /// The wall-clock part (the high 48 bits): milliseconds since 1970.
    public var milliseconds: UInt64 { rawValue >> 16 }
    /// The logical part (the low 16 bits), which orders events stamped within one millisecond or
    /// while the wall clock lags behind.
    public var counter: UInt16 { UInt16(truncatingIfNeeded: rawValue) }

    /// The timestamp for a new local event: the wall clock if it is ahead of `self`, else one tick
    /// after `self` (a counter overflow carries into the milliseconds).
    public func advanced(toWallClock milliseconds: UInt64 = HLC.wallClockMilliseconds()) -> HLC {
        let wall = HLC(milliseconds: milliseconds, counter: 0)
        return wall > self ? wall : HLC(rawValue: rawValue &+ 1)
    }

    /// How far ahead of the wall clock a remote HLC may be: 5 minutes.
    public static let maximumDrift: UInt64 = 5 * 60 * 1000

    /// Whether this timestamp is more than `drift` milliseconds ahead of the clock reading
    /// `milliseconds`: stamped by a clock that was wrong, so that it cannot be compared with honest
    /// ones. The one test of a timestamp from the future, for devices, the store and the server.
    public func isAhead(of milliseconds: UInt64, by drift: UInt64 = HLC.maximumDrift) -> Bool {
        self.milliseconds > milliseconds &+ drift
    }

    /// The timestamp for receiving a remote event stamped `remote` (HLC's receive rule): after both
    /// `self` and `remote`, and at least the wall clock. When the wall clock is behind (it went
    /// backwards, or `remote` came from a clock ahead of ours) the later of the two HLCs ticks on by
    /// one; a counter overflow carries into the milliseconds.
    ///
    /// - Throws: `ClockSkew` if `remote` is more than `maximumDrift` ahead of the wall clock: taking
    ///   it would drag this clock (and every later local write) into the future.
    public func received(
        _ remote: HLC,
        wallClock milliseconds: UInt64 = HLC.wallClockMilliseconds(),
        maximumDrift: UInt64 = HLC.maximumDrift
    ) throws(ClockSkew) -> HLC {
        guard !remote.isAhead(of: milliseconds, by: maximumDrift) else {
            throw ClockSkew(remote: remote, wallClockMilliseconds: milliseconds, maximumDrift: maximumDrift)
        }
        let wall = HLC(milliseconds: milliseconds, counter: 0)
        let later = Swift.max(self, remote)
        if wall > later { return wall }
        return later.rawValue == .max ? later : HLC(rawValue: later.rawValue + 1)
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
            throw DecodingError.dataCorruptedError(
                in: container,
                debugDescription: "an HLC is a decimal string of an unsigned 64-bit number, got \(text)"
            )
        }
        self.init(rawValue: raw)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(String(rawValue))
    }
}

/// A remote HLC too far ahead of this machine's wall clock.
public struct ClockSkew: Error, Sendable, CustomStringConvertible {
    /// The remote timestamp that was refused.
    public let remote: HLC
    /// This machine's wall clock when it was refused, in milliseconds since 1970.
    public let wallClockMilliseconds: UInt64
    /// How far ahead of that wall clock a remote HLC was allowed to be, in milliseconds.
    public let maximumDrift: UInt64

    public var description: String {
        let ahead = Double(remote.milliseconds &- wallClockMilliseconds) / 1000
        return "a remote timestamp is \(ahead) s ahead of this machine's clock (at most \(maximumDrift / 1000) s are accepted): "
            + "one of the two clocks is wrong"
    }
}

/// When and where a value or a removal was written: its HLC and the origin (store) id.
/// Sync compares stamps to decide which of two writes to one key wins.
public struct Stamp: Hashable, Comparable, Sendable {
    /// The HLC of the writing store's clock when it made the write; compared first.
    public var hlc: HLC
    /// The origin id of the store that made the write (an entry's `origin`, the `device_id` of a
    /// push); it breaks ties between equal HLCs.
    public var origin: UInt64

    /// The stamp of a write made at `hlc` by the store whose origin id is `origin`.
    public init(hlc: HLC, origin: UInt64) {
        self.hlc = hlc
        self.origin = origin
    }

    public static func < (lhs: Stamp, rhs: Stamp) -> Bool {
        (lhs.hlc, lhs.origin) < (rhs.hlc, rhs.origin)
    }
}
