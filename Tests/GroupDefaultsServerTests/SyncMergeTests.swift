import GroupDefaultsServer
import GroupDefaultsWire
import Testing

@Suite("Last writer wins")
struct SyncMergeTests {
    @Test("the larger (HLC, origin) wins; ties in HLC go to the larger origin; the same stamp does not replace itself")
    func wins() {
        let stored = Stamp(hlc: HLC(rawValue: 100), origin: 5)
        #expect(SyncMerge.wins(Stamp(hlc: HLC(rawValue: 101), origin: 1), over: stored))
        #expect(!SyncMerge.wins(Stamp(hlc: HLC(rawValue: 99), origin: .max), over: stored))
        #expect(SyncMerge.wins(Stamp(hlc: HLC(rawValue: 100), origin: 6), over: stored))
        #expect(!SyncMerge.wins(Stamp(hlc: HLC(rawValue: 100), origin: 4), over: stored))
        #expect(!SyncMerge.wins(stored, over: stored))
        #expect(SyncMerge.wins(stored, over: nil))
    }

    @Test("stamps order as unsigned 64-bit numbers, above 2^63 too")
    func unsigned() {
        let high = Stamp(hlc: HLC(rawValue: (1 << 63) + 5), origin: 1)
        let below = Stamp(hlc: HLC(rawValue: (1 << 63) - 1), origin: .max)
        #expect(SyncMerge.wins(high, over: below))
        #expect(!SyncMerge.wins(below, over: high))
        #expect(SyncMerge.wins(Stamp(hlc: HLC(rawValue: .max), origin: 0), over: high))
    }

    @Test("a stamp more than the skew ahead of the clock is from a wrong clock; up to the skew it is not")
    func ahead() {
        let now: UInt64 = 1_800_000_000_000
        #expect(HLC(milliseconds: now + 300_001, counter: 0).isAhead(of: now, by: 300_000))
        #expect(!HLC(milliseconds: now + 300_000, counter: 9).isAhead(of: now, by: 300_000))
    }
}
