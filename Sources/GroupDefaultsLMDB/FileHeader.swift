import Glibc

/// Reads LMDB's meta pages straight from the data file, without LMDB.
///
/// With `MDB_WRITEMAP` LMDB extends the file to the map size when it opens it, which would quietly
/// paper over a truncated file (the missing pages become zeros). Reading the header first lets the
/// store refuse such a file instead. The layout is LMDB 0.9's on-disk format: a 16-byte page header,
/// then `MDB_meta`: magic, version, address, map size, two `MDB_db` records of 48 bytes (free pages,
/// then the main database; the first one's `md_pad` holds the page size), last page number, txn id.
package enum FileHeader {
    static let magic: UInt32 = 0xBEEF_C0DE
    /// `MDB_DATA_VERSION` of the LMDB 0.9 format this reader knows.
    static let dataVersion: UInt32 = 1
    static let invalidPage = UInt64.max

    package struct Truncated: Error, CustomStringConvertible {
        package let actualSize: Int
        package let requiredSize: Int
        /// Whether its newest meta page is the one LMDB writes when it creates a file (transaction
        /// 0): a creation that never finished, which a power cut during it leaves (LMDB writes its
        /// two meta pages at once, and only the first reached the disk). Nothing in it can be lost,
        /// so `Environment` starts it over rather than refuse it. A file without a meta page LMDB
        /// would recognise (a file of zeros may be a suite whose pages a crash never wrote) is
        /// reported, not wiped.
        package let neverCommitted: Bool
        package var description: String {
            "the file is truncated: it has \(actualSize) bytes but its header says \(requiredSize) are in use"
        }
    }

    /// An `MDB_db` record: one B-tree's root and shape.
    struct TreeRecord {
        var flags: UInt16
        var depth: UInt16
        var entries: UInt64
        var root: UInt64

        init(_ raw: UnsafeRawBufferPointer, at offset: Int) {
            flags = raw.loadUnaligned(fromByteOffset: offset + 4, as: UInt16.self)
            depth = raw.loadUnaligned(fromByteOffset: offset + 6, as: UInt16.self)
            entries = raw.loadUnaligned(fromByteOffset: offset + 32, as: UInt64.self)
            root = raw.loadUnaligned(fromByteOffset: offset + 40, as: UInt64.self)
        }

        static let size = 48
    }

    struct Meta {
        var pageSize: Int
        /// The format's data version (`mm_version`).
        var version: UInt32
        var lastPage: UInt64
        var txnID: UInt64
        var freeTree: TreeRecord
        var mainTree: TreeRecord

        /// Bytes the pages in use span, or nil if the header's numbers overflow.
        var usedSize: Int? {
            let (pages, o1) = lastPage.addingReportingOverflow(1)
            let (bytes, o2) = pages.multipliedReportingOverflow(by: UInt64(pageSize))
            return o1 || o2 || bytes > UInt64(Int.max) ? nil : Int(bytes)
        }
    }

    /// Throws `Truncated` when the file at `fd` is shorter than the pages its newest valid meta page
    /// says are in use. Files whose header LMDB would not recognise are left for LMDB to reject.
    /// Returns the two meta pages read (for `StructureCheck.verify`, which then need not read them
    /// again if nothing committed meanwhile).
    @discardableResult
    static func checkNotTruncated(fd: Int32, fileSize: Int) throws -> (Meta, Meta?)? {
        guard let first = readMeta(fd: fd, offset: 0), StructureCheck.understands(fileVersion: first.version) else { return nil }
        var newest = first
        let second = readMeta(fd: fd, offset: first.pageSize)
        if let second, second.txnID > first.txnID { newest = second }
        guard let required = newest.usedSize else { return nil }  // garbage: LMDB rejects it
        if fileSize < required {
            throw Truncated(actualSize: fileSize, requiredSize: required, neverCommitted: newest.txnID == 0)
        }
        return (first, second)
    }

    /// The meta page at `offset`, or nil if it does not carry LMDB's magic and a sane page size.
    static func readMeta(fd: Int32, offset: Int) -> Meta? {
        let size = 152
        return withUnsafeTemporaryAllocation(byteCount: size, alignment: 8) { buffer -> Meta? in
            guard pread(fd, buffer.baseAddress, size, off_t(offset)) == size else { return nil }
            let raw = UnsafeRawBufferPointer(buffer)
            guard raw.loadUnaligned(fromByteOffset: 16, as: UInt32.self) == magic else { return nil }
            let pageSize = Int(raw.loadUnaligned(fromByteOffset: 40, as: UInt32.self))
            guard pageSize >= 512, pageSize <= 65536, pageSize & (pageSize - 1) == 0 else { return nil }
            return Meta(
                pageSize: pageSize,
                version: raw.loadUnaligned(fromByteOffset: 20, as: UInt32.self),
                lastPage: raw.loadUnaligned(fromByteOffset: 136, as: UInt64.self),
                txnID: raw.loadUnaligned(fromByteOffset: 144, as: UInt64.self),
                freeTree: TreeRecord(raw, at: 40),
                mainTree: TreeRecord(raw, at: 88)
            )
        }
    }
}
