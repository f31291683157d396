internal import CLMDB
import Glibc

/// The file's B-tree structure is damaged.
package struct StructureDamage: Error, CustomStringConvertible {
    package let description: String
    init(_ description: String) { self.description = description }
}

/// Walks every page reachable from a snapshot's meta page and checks it against LMDB's page format,
/// before LMDB itself follows any of it.
///
/// LMDB trusts its pages: a damaged node offset, size, flag or page number makes it read outside
/// the map and crash the process. This walk finds such damage first, so that opening a damaged file
/// is an error, not a crash. It checks, for the free-page tree, the main tree and each named tree:
/// page numbers in range and visited once, page headers (number, kind, bounds), every node inside
/// its page, branch depth equal to the tree's depth, overflow pages in range, entry counts, and
/// free-list page numbers. It reads the main tree's pages with `pread`; once those are checked, it
/// asks LMDB for one of the main tree's records, whose address tells where LMDB maps the file, and
/// reads every other page in place from that map (no system call per page: on the path of opening a
/// suite, a `pread` per page cost more than LMDB's whole open). All under a transaction that keeps
/// the snapshot's pages from being reused while it runs; the file's size is checked against the pages
/// in use first, so no read can fault past its end.
///
/// Opening a suite checks what readers follow (the main tree and the `values` and `meta` trees);
/// the first write of a process checks the rest (free pages, `tombstones`, `log`) before LMDB
/// touches them. A short-lived reader, such as a notification-service extension, pays only for
/// the former.
///
/// Once per file state, not once per open: a walk records the state it verified in the sidecar
/// (`VerifiedState`), the library's commits keep that record true, and an open of a state the
/// record vouches for checks only the meta page, the main tree and the root page of each tree in
/// scope, a cost that does not grow with the suite. A file committed to by anything else, replaced,
/// restored or changed in place is walked again; `VerifiedState` says exactly what it cannot see.
package enum StructureCheck {
    private static let pageHeaderSize = 16
    private static let nodeHeaderSize = 8
    private static let maximumDepth = 32  // LMDB's cursor stack
    private static let branchFlag: UInt16 = 0x01, leafFlag: UInt16 = 0x02, overflowFlag: UInt16 = 0x04
    private static let dirtyFlag: UInt16 = 0x10
    private static let bigDataFlag: UInt16 = 0x01, subDataFlag: UInt16 = 0x02
    private static let duplicateSortFlags: UInt16 = 0x04 | 0x10 | 0x20 | 0x40  // DUPSORT, DUPFIXED, INTEGERDUP, REVERSEDUP

    /// What to walk.
    package enum Scope: Sendable, Equatable {
        /// The main tree and the named trees listed (for example what a plain reader follows).
        case trees([String])
        /// Every tree, free pages included.
        case everything
    }

    /// Whether the walk understands the file: it knows LMDB 0.9's page format (data version 1), and
    /// the library must be an LMDB 0.9. Anything else is left to LMDB, unchecked, rather than being
    /// called damaged.
    static func understands(fileVersion: UInt32) -> Bool {
        var major: Int32 = 0
        var minor: Int32 = 0
        var patch: Int32 = 0
        _ = mdb_version(&major, &minor, &patch)
        return major == 0 && minor == 9 && fileVersion == FileHeader.dataVersion
    }

    /// What `verify` did.
    package enum Outcome: Sendable, Equatable {
        /// Every page of the scope was walked.
        case walked
        /// The verified-state record vouched for the snapshot (see `VerifiedState`): only the meta
        /// page, the main tree and the root page of each tree in scope were checked.
        case trusted
        /// Not checked: the pages in use exceed the limit, or the file's format is not one the walk
        /// knows.
        case unchecked
    }

    /// What `verify` needs to consult and keep the verified-state record.
    struct StateCheck {
        let record: VerifiedState
        /// The library's commit count read before the transaction began.
        let commitsBefore: UInt32
        /// The file's change time before this process's LMDB opened it (which changes it), when the
        /// check is made while opening.
        let changeTimeBeforeOpen: UInt64?
        /// The meta pages read before LMDB opened the file, if any: used if still current.
        var metas: (FileHeader.Meta, FileHeader.Meta?)? = nil
    }

    /// Checks the snapshot `txnID` (the transaction id of a read transaction, or the last committed
    /// one under a write transaction). Returns without checking when the pages in use exceed `limit`
    /// bytes (the walk touches every page). With `state`, a snapshot the verified-state record vouches
    /// for is only checked near its roots, and a walked one is recorded.
    @discardableResult
    static func verify(
        env: OpaquePointer,
        txn: OpaquePointer,
        snapshot txnID: UInt64,
        limit: Int,
        scope: Scope,
        state: StateCheck? = nil
    ) throws -> Outcome {
        var fd: Int32 = -1
        try check(mdb_env_get_fd(env, &fd))
        guard let first = state?.metas?.0 ?? FileHeader.readMeta(fd: fd, offset: 0) else { throw StructureDamage("meta page 0 is damaged") }
        guard understands(fileVersion: first.version) else { return .unchecked }
        let known = txnID & 1 == 0 ? state?.metas?.0 : state?.metas?.1
        guard let meta = known?.txnID == txnID ? known : FileHeader.readMeta(fd: fd, offset: Int(txnID & 1) * first.pageSize),
            meta.txnID == txnID
        else {
            throw Retry()
        }
        guard let used = meta.usedSize else { throw StructureDamage("the last page number \(meta.lastPage) is impossible") }
        guard used <= limit else { return .unchecked }
        var st = stat()
        guard fstat(fd, &st) == 0, Int(st.st_size) >= used else {
            throw FileHeader.Truncated(actualSize: Int(st.st_size), requiredSize: used, neverCommitted: meta.txnID == 0)
        }
        let everything = scope == .everything
        let changeTime = VerifiedState.changeTime(st)
        let file = VerifiedState.file(device: UInt64(st.st_dev), inode: UInt64(st.st_ino), everything: everything)
        let trusted = state.flatMap { vouched($0, snapshot: txnID, file: file, everything: everything, changeTime: changeTime) }
        // One buffer per slot, allocated when first used: once LMDB's map is located pages are read
        // in place, so most walks use one or two (a block for all of them is a `mmap` and page faults).
        let buffers = UnsafeMutablePointer<UnsafeMutableRawPointer?>.allocate(capacity: Walker.slots + 1)
        buffers.initialize(repeating: nil, count: Walker.slots + 1)
        let visited = UnsafeMutablePointer<UInt64>.allocate(capacity: Walker.visitedWords(lastPage: meta.lastPage))
        defer {
            for slot in 0...Walker.slots { buffers[slot]?.deallocate() }
            buffers.deallocate()
            visited.deallocate()
        }
        var info = MDB_envinfo()
        try check(mdb_env_info(env, &info))
        var walker = Walker(fd: fd, buffers: buffers, visited: visited, pageSize: meta.pageSize, lastPage: meta.lastPage, scope: scope)
        walker.txn = info.me_mapsize >= used ? txn : nil  // LMDB's map covers every page in use
        walker.rootsOnly = trusted != nil
        if scope == .everything && trusted == nil { try walker.tree(meta.freeTree, kind: .free, name: "free-page tree") }
        try walker.tree(meta.mainTree, kind: .main, name: "main tree")
        guard let state else { return .walked }
        if let trusted {
            // Pin the change time this open explains (its own truncation to the map size), so that
            // the next open compares against it.
            if trusted.changeTime != changeTime || trusted.txnID != txnID {
                state.record.store(.init(file: trusted.file, txnID: txnID, changeTime: changeTime, commits: state.commitsBefore))
            }
            return .trusted
        }
        // Recorded only if no commit of the library ended meanwhile (it may be in this snapshot,
        // uncounted, which would only make the next open walk again).
        if state.record.commitCount == state.commitsBefore {
            state.record.store(.init(file: file, txnID: txnID, changeTime: changeTime, commits: state.commitsBefore))
        }
        return .walked
    }

    /// The record, if it vouches for snapshot `txnID` of `file` (see `VerifiedState`).
    private static func vouched(
        _ state: StateCheck,
        snapshot txnID: UInt64,
        file: UInt64,
        everything: Bool,
        changeTime: UInt64
    ) -> VerifiedState.Record? {
        guard let recorded = state.record.load(), recorded.file | 1 == file | 1, recorded.coversEverything || !everything,
            txnID >= recorded.txnID
        else { return nil }
        let commits = state.record.commitCount
        guard commits == state.commitsBefore else { return nil }  // a commit of the library ended meanwhile
        let commitsSince = commits &- recorded.commits
        guard txnID - recorded.txnID == UInt64(commitsSince) else { return nil }  // something else committed
        let seen = state.changeTimeBeforeOpen ?? changeTime
        let unchanged = commitsSince == 0 ? seen == recorded.changeTime : seen <= state.record.lastCommitTime
        return unchanged ? recorded : nil
    }

    /// A writer committed twice while the meta page was being read; read it again.
    package struct Retry: Error {}

    private enum TreeKind { case free, main, named }

    private struct Walker {
        let fd: Int32
        /// One page-sized buffer per page on the path being walked (the main tree's, then a named
        /// tree's), and one for overflow pages; each allocated when first used, freed by the caller.
        let buffers: UnsafeMutablePointer<UnsafeMutableRawPointer?>
        static let slots = 2 * maximumDepth
        private var overflowSlot: Int { Self.slots }
        let pageSize: Int
        let lastPage: UInt64
        let scope: Scope
        /// One bit per page, in words the caller allocates and frees. (A plain buffer, not an
        /// array: the first array of a new element type costs a cold-starting process ~20 µs of
        /// metadata set-up, and this walk is on the path of opening a suite.)
        let visited: UnsafeMutablePointer<UInt64>
        /// The transaction the walk runs under, for locating LMDB's map (nil: read every page).
        var txn: OpaquePointer?
        /// Where LMDB maps page 0, once located: pages are then read in place.
        var map: UnsafeRawPointer?
        /// Check only the root page of each named tree (its children's numbers are checked to be in
        /// range, not followed), for a snapshot the verified-state record vouches for.
        var rootsOnly = false

        static func visitedWords(lastPage: UInt64) -> Int { Int(lastPage / 64) + 1 }

        init(
            fd: Int32,
            buffers: UnsafeMutablePointer<UnsafeMutableRawPointer?>,
            visited: UnsafeMutablePointer<UInt64>,
            pageSize: Int,
            lastPage: UInt64,
            scope: Scope
        ) {
            self.fd = fd
            self.buffers = buffers
            self.pageSize = pageSize
            self.lastPage = lastPage
            self.scope = scope
            self.visited = visited
            visited.initialize(repeating: 0, count: Self.visitedWords(lastPage: lastPage))
        }

        /// Walks one tree; its root's page is read into buffer `slot`, its children's into the next.
        mutating func tree(_ record: FileHeader.TreeRecord, kind: TreeKind, name: String, slot: Int = 0) throws {
            if record.root == FileHeader.invalidPage {
                guard record.entries == 0, record.depth == 0 else { throw StructureDamage("the empty \(name) claims entries") }
                return
            }
            guard record.depth >= 1, record.depth <= maximumDepth else {
                throw StructureDamage("the \(name) has an impossible depth \(record.depth)")
            }
            guard record.flags & duplicateSortFlags == 0 else {
                throw StructureDamage("the \(name) has flags this store never sets")
            }
            var entries: UInt64 = 0
            try page(record.root, level: 1, depth: Int(record.depth), kind: kind, name: name, slot: slot, entries: &entries)
            guard entries == record.entries || (rootsOnly && kind == .named && record.depth > 1) else {
                throw StructureDamage("the \(name) counts \(record.entries) entries but holds \(entries)")
            }
        }

        private mutating func claim(_ pgno: UInt64, _ name: String) throws {
            guard pgno >= 2, pgno <= lastPage else { throw StructureDamage("the \(name) points to page \(pgno), outside the file") }
            let (word, bit) = (Int(pgno / 64), pgno % 64)
            guard visited[word] & (1 << bit) == 0 else { throw StructureDamage("page \(pgno) is reached twice in the \(name)") }
            visited[word] |= 1 << bit
        }

        /// Reads the first `count` bytes of page `pgno` into buffer `slot`.
        private func read(_ pgno: UInt64, slot: Int, count: Int? = nil) throws -> UnsafeRawPointer {
            guard slot <= Self.slots else { throw StructureDamage("trees nest deeper than LMDB allows") }
            if let map, pgno <= lastPage { return map + Int(pgno) * pageSize }
            let destination: UnsafeMutableRawPointer
            if let buffer = buffers[slot] {
                destination = buffer
            } else {
                destination = UnsafeMutableRawPointer.allocate(byteCount: pageSize, alignment: 16)
                buffers[slot] = destination
            }
            let count = count ?? pageSize
            guard pread(fd, destination, count, off_t(Int(pgno) * pageSize)) == count else {
                throw StructureDamage("page \(pgno) cannot be read")
            }
            return UnsafeRawPointer(destination)
        }

        private func u16(_ p: UnsafeRawPointer, _ offset: Int) -> Int { Int(p.loadUnaligned(fromByteOffset: offset, as: UInt16.self)) }
        private func u64(_ p: UnsafeRawPointer, _ offset: Int) -> UInt64 { p.loadUnaligned(fromByteOffset: offset, as: UInt64.self) }

        private mutating func page(
            _ pgno: UInt64,
            level: Int,
            depth: Int,
            kind: TreeKind,
            name: String,
            slot: Int,
            entries: inout UInt64
        ) throws {
            try claim(pgno, name)
            guard slot < Self.slots else { throw StructureDamage("trees nest deeper than LMDB allows") }
            let p = try read(pgno, slot: slot)
            guard u64(p, 0) == pgno else { throw StructureDamage("page \(pgno) of the \(name) carries the number \(u64(p, 0))") }
            let flags = UInt16(u16(p, 10)) & ~dirtyFlag
            let isBranch = level < depth
            guard flags == (isBranch ? branchFlag : leafFlag) else {
                throw StructureDamage("page \(pgno) of the \(name) should be a \(isBranch ? "branch" : "leaf") page (flags \(flags))")
            }
            let lower = u16(p, 12)
            let upper = u16(p, 14)
            guard lower >= pageHeaderSize, lower <= upper, upper <= pageSize, (lower - pageHeaderSize) % 2 == 0 else {
                throw StructureDamage("page \(pgno) of the \(name) has impossible bounds \(lower)…\(upper)")
            }
            let count = (lower - pageHeaderSize) / 2
            if isBranch && count == 0 { throw StructureDamage("branch page \(pgno) of the \(name) is empty") }
            for i in 0..<count {
                let offset = u16(p, pageHeaderSize + 2 * i)
                guard offset >= upper, offset + nodeHeaderSize <= pageSize else {
                    throw StructureDamage("a node of page \(pgno) in the \(name) lies outside the page")
                }
                let lo = UInt64(u16(p, offset))
                let hi = UInt64(u16(p, offset + 2))
                let nodeFlags = UInt16(u16(p, offset + 4))
                let keySize = u16(p, offset + 6)
                let dataOffset = offset + nodeHeaderSize + keySize
                guard dataOffset <= pageSize else { throw StructureDamage("a key of page \(pgno) in the \(name) runs past the page") }
                if isBranch {
                    let child = lo | hi << 16 | UInt64(nodeFlags) << 32
                    if rootsOnly && kind == .named {
                        guard child >= 2, child <= lastPage else {
                            throw StructureDamage("the \(name) points to page \(child), outside the file")
                        }
                        continue
                    }
                    try page(child, level: level + 1, depth: depth, kind: kind, name: name, slot: slot + 1, entries: &entries)
                    continue
                }
                entries += 1
                let dataSize = Int(lo | hi << 16)
                switch nodeFlags {
                case 0:
                    guard dataOffset + dataSize <= pageSize else {
                        throw StructureDamage("a value on page \(pgno) of the \(name) runs past the page")
                    }
                case bigDataFlag:
                    guard dataOffset + 8 <= pageSize else { throw StructureDamage("a node on page \(pgno) of the \(name) runs past the page") }
                    let first = u64(p, dataOffset)
                    try overflow(first, dataSize: dataSize, name: name)
                    if kind == .free, let map {
                        try freeList(map + Int(first) * pageSize + pageHeaderSize, size: dataSize, name: name)
                    } else if kind == .free {
                        let data = UnsafeMutableRawPointer.allocate(byteCount: dataSize, alignment: 8)
                        defer { data.deallocate() }
                        guard pread(fd, data, dataSize, off_t(Int(first) * pageSize + pageHeaderSize)) == dataSize else {
                            throw StructureDamage("overflow page \(first) of the \(name) cannot be read")
                        }
                        try freeList(UnsafeRawPointer(data), size: dataSize, name: name)
                    }
                case subDataFlag where kind == .main:
                    guard dataSize == FileHeader.TreeRecord.size, dataOffset + dataSize <= pageSize else {
                        throw StructureDamage("a database record on page \(pgno) is damaged")
                    }
                    let record = FileHeader.TreeRecord(UnsafeRawBufferPointer(start: p, count: pageSize), at: dataOffset)
                    let treeName = String(decoding: UnsafeRawBufferPointer(start: p + offset + nodeHeaderSize, count: keySize), as: UTF8.self)
                    let follows =
                        switch scope {
                        case .everything: true
                        case .trees(let names): names.contains(treeName)
                        }
                    if follows {
                        if map == nil { locateMap(key: p + offset + nodeHeaderSize, keySize: keySize, page: pgno) }
                        try tree(record, kind: .named, name: "tree '\(treeName)'", slot: slot + 1)
                    }
                default:
                    throw StructureDamage("a node on page \(pgno) of the \(name) has flags \(nodeFlags) this store never sets")
                }
                if kind == .free && nodeFlags == 0 {
                    try freeList(p + dataOffset, size: dataSize, name: name)
                }
            }
        }

        /// Finds where LMDB maps the file from the record `key` of the main tree's page `page`, which
        /// this walk has checked: LMDB returns its data as a pointer into that page in its map. Leaves
        /// `map` nil (pages are then read with `pread`) if anything does not add up.
        private mutating func locateMap(key: UnsafeRawPointer, keySize: Int, page: UInt64) {
            guard let txn else { return }
            // Opening the main database (no name, no page read) sets its key comparison, which LMDB
            // leaves unset until a database is first opened.
            var main: MDB_dbi = 0
            guard mdb_dbi_open(txn, nil, 0, &main) == 0 else { return }
            var k = MDB_val(mv_size: keySize, mv_data: UnsafeMutableRawPointer(mutating: key))
            var v = MDB_val()
            guard mdb_get(txn, main, &k, &v) == 0, let data = v.mv_data else { return }
            let pageStart = UInt(bitPattern: data) & ~UInt(pageSize - 1)
            guard let start = UnsafeRawPointer(bitPattern: pageStart),
                start.loadUnaligned(as: UInt64.self) == page,  // that page's own number, in its header
                pageStart >= UInt(page) * UInt(pageSize)
            else { return }
            map = UnsafeRawPointer(bitPattern: pageStart - UInt(page) * UInt(pageSize))
        }

        private mutating func overflow(_ pgno: UInt64, dataSize: Int, name: String) throws {
            try claim(pgno, name)
            let p = try read(pgno, slot: overflowSlot, count: pageHeaderSize)
            let pages = UInt64(p.loadUnaligned(fromByteOffset: 12, as: UInt32.self))
            guard u64(p, 0) == pgno, UInt16(u16(p, 10)) & ~dirtyFlag == overflowFlag, pages >= 1,
                pgno + pages - 1 <= lastPage, UInt64(dataSize) <= pages * UInt64(pageSize) - UInt64(pageHeaderSize)
            else { throw StructureDamage("overflow page \(pgno) of the \(name) is damaged") }
            for extra in 1..<pages { try claim(pgno + extra, name) }
        }

        /// A free-list record: a count, then that many page numbers.
        private func freeList(_ p: UnsafeRawPointer, size: Int, name: String) throws {
            guard size >= 8, size % 8 == 0, u64(p, 0) == UInt64(size / 8 - 1) else {
                throw StructureDamage("a free-list record of the \(name) is damaged")
            }
            for i in 1..<(size / 8) where u64(p, 8 * i) > lastPage {
                throw StructureDamage("the free list names page \(u64(p, 8 * i)), outside the file")
            }
        }
    }
}
