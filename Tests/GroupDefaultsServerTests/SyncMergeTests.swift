import GroupDefaultsWire
import GroupDefaultsServer
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
}
