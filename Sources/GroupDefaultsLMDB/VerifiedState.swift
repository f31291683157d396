internal import CLMDB
import Glibc

/// Which committed state of the file the structure check last verified, kept in 48 bytes that the
/// caller lends in its lock file (the core's sidecar), so that opening a file that has not changed
/// since it was verified, or that changed only through commits of this library, skips the walk of
/// every page (`StructureCheck`), whose cost grows with the suite.
///
/// Layout (native byte order, at an 8-byte-aligned offset of a file every process maps):
/// - `+0` the time the library's last commit ended (nanoseconds since the epoch, raised only);
/// - `+8` the library's commit count (32 bits, wrapping): every commit made through `Environment`
///   that wrote something adds one once LMDB has committed it;
/// - `+16` the record: the file's identity (a hash of device and inode) with the scope verified
///   in its low bit, the verified transaction id, the file's change time (`st_ctim`) when it was
///   verified, and the commit count then with a 32-bit check of the record in the last word.
///
/// A state is trusted (`StructureCheck.verify` walks it no further than the meta pages, the main tree
/// and each followed tree's root page) when the record is whole (its check holds), names this file
/// (same device and inode) and covers the scope asked for, and every transaction committed since
/// the recorded one was a commit of this library (the transaction ids and the commit count advanced
/// by the same amount: a commit by anything else, such as another LMDB program, advances the id
/// alone). Besides, the file's change time must show that nothing else wrote into it in place:
/// - if nothing was committed since the record, the change time must be the recorded one (on Linux
///   ≥ 6.13 every write after a `stat` gets a new change time, however soon);
/// - else it must be no later than the end of the library's last commit.
/// Opening with `MDB_WRITEMAP` truncates the file to the map size, which changes the change time:
/// the caller gives the change time it saw before LMDB opened the file, and the record is then
/// renewed with the time after, which that open explains.
///
/// What this cannot notice (documented in ARCHITECTURE.md and in docs/guide/guarantees-and-limits.md):
/// bytes changed in place (same inode, meta pages untouched) by something other than this
/// library within one kernel clock tick after a commit of the library (the coarse change time may
/// then not be later than the commit's end), before a later commit of the library, or while
/// another process opens the file (between its two `stat`s). A writer that damages the meta pages,
/// commits through LMDB, or replaces, truncates or restores the file is always noticed.
struct VerifiedState {
    /// The 48 bytes lent, in a shared mapping that outlives this value.
    let base: UnsafeMutableRawPointer

    static let size = 48

    struct Record: Equatable {
        /// A hash of the file's device and inode, with the scope in bit 0 (1: every tree).
        var file: UInt64
        var txnID: UInt64
        var changeTime: UInt64
        var commits: UInt32

        var coversEverything: Bool { file & 1 == 1 }
    }

    private var lastCommitTimeWord: UnsafeMutablePointer<UInt> { base.assumingMemoryBound(to: UInt.self) }
    private var commitCountWord: UnsafeMutablePointer<UInt32> { (base + 8).assumingMemoryBound(to: UInt32.self) }
    private func recordWord(_ index: Int) -> UnsafeMutablePointer<UInt> {
        (base + 16 + 8 * index).assumingMemoryBound(to: UInt.self)
    }

    /// The library's commit count, as every process has advanced it.
    var commitCount: UInt32 { gd_atomic_load_u32(commitCountWord) }

    /// When the library's last commit ended (nanoseconds since the epoch).
    var lastCommitTime: UInt64 { UInt64(gd_atomic_load_u64(lastCommitTimeWord)) }

    /// Called after each commit of the library that wrote something, once LMDB has committed it.
    func noteCommit() {
        gd_atomic_add_u32(commitCountWord, 1)
        gd_atomic_max_u64(lastCommitTimeWord, UInt(Self.now()))
    }

    /// The record, or nil if there is none or it is torn or damaged.
    func load() -> Record? {
        let file = UInt64(gd_atomic_load_u64(recordWord(0)))
        let txnID = UInt64(gd_atomic_load_u64(recordWord(1)))
        let changeTime = UInt64(gd_atomic_load_u64(recordWord(2)))
        let last = UInt64(gd_atomic_load_u64(recordWord(3)))
        let record = Record(file: file, txnID: txnID, changeTime: changeTime, commits: UInt32(truncatingIfNeeded: last))
        return UInt32(truncatingIfNeeded: last >> 32) == Self.check(record) ? record : nil
    }

    /// Replaces the record. Two processes storing at once can leave a mix of both, which fails the
    /// check (and makes the next open walk the file).
    func store(_ record: Record) {
        gd_atomic_store_u64(recordWord(3), 0)  // invalid while the words change
        gd_atomic_store_u64(recordWord(0), UInt(record.file))
        gd_atomic_store_u64(recordWord(1), UInt(record.txnID))
        gd_atomic_store_u64(recordWord(2), UInt(record.changeTime))
        gd_atomic_store_u64(recordWord(3), UInt(UInt64(Self.check(record)) << 32 | UInt64(record.commits)))
    }

    /// The identity word of a file, for `scope`.
    static func file(device: UInt64, inode: UInt64, everything: Bool) -> UInt64 {
        mix(mix(device ^ 0x6764_7374_6174_6531) ^ inode) & ~1 | (everything ? 1 : 0)
    }

    /// A file's change time in nanoseconds.
    static func changeTime(_ st: stat) -> UInt64 {
        UInt64(max(0, st.st_ctim.tv_sec)) &* 1_000_000_000 &+ UInt64(max(0, st.st_ctim.tv_nsec))
    }

    static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return UInt64(max(0, ts.tv_sec)) &* 1_000_000_000 &+ UInt64(max(0, ts.tv_nsec))
    }

    /// 32 bits of a keyless hash of the record's fields; never 0 for any record, so that zeros (a
    /// new sidecar) are no record.
    private static func check(_ record: Record) -> UInt32 {
        var h = mix(record.file ^ 0x7665_7269_6669_6564)
        h = mix(h ^ record.txnID)
        h = mix(h ^ record.changeTime)
        h = mix(h ^ UInt64(record.commits))
        let folded = UInt32(truncatingIfNeeded: h ^ h >> 32)
        return folded == 0 ? 1 : folded
    }

    /// A 64-bit finaliser (xor-shift and odd-multiplier rounds) that spreads every input bit.
    private static func mix(_ value: UInt64) -> UInt64 {
        var x = value
        x = (x ^ x >> 31) &* 0x7FB5_D329_728E_A185
        x = (x ^ x >> 27) &* 0x81DA_DEF4_BC2D_D44D
        return x ^ x >> 33
    }
}
