import Glibc

/// Reads LMDB's two meta pages straight from the data file, before LMDB maps it.
///
/// With `MDB_WRITEMAP` LMDB extends the file to the map size when it opens it, which would quietly
/// paper over a truncated file (the missing pages become zeros). Reading the header first lets the
/// store refuse such a file instead. The layout is LMDB 0.9's on-disk format:
/// page header (16 bytes), then `MDB_meta`: magic, version, address, map size, two `MDB_db`
/// records of 48 bytes (the first one's `md_pad` holds the page size), last page number, txn id.
enum FileHeader {
    static let magic: UInt32 = 0xBEEF_C0DE

    struct Truncated: Error, CustomStringConvertible {
        let actualSize: Int
        let requiredSize: Int
        var description: String {
            "the file is truncated: it has \(actualSize) bytes but its header says \(requiredSize) are in use"
        }
    }

    /// Throws `Truncated` when the file at `fd` is shorter than the pages its newest valid meta page
    /// says are in use. Files whose header LMDB would not recognise are left for LMDB to reject.
    static func checkNotTruncated(fd: Int32, fileSize: Int) throws {
        guard let first = readMeta(fd: fd, offset: 0) else { return }
        let second = readMeta(fd: fd, offset: first.pageSize)
        let newest = [first, second].compactMap { $0 }.max { $0.txnID < $1.txnID }!
        let (pages, overflow) = newest.lastPage.addingReportingOverflow(1)
        let (required, overflow2) = pages.multipliedReportingOverflow(by: UInt64(newest.pageSize))
        guard !overflow, !overflow2, required <= UInt64(Int.max) else { return }  // garbage: LMDB rejects it
        if UInt64(fileSize) < required {
            throw Truncated(actualSize: fileSize, requiredSize: Int(required))
        }
    }

    private struct Meta {
        var pageSize: Int
        var lastPage: UInt64
        var txnID: UInt64
    }

    private static func readMeta(fd: Int32, offset: Int) -> Meta? {
        var buffer = [UInt8](repeating: 0, count: 152)
        let count = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, off_t(offset)) }
        guard count == buffer.count else { return nil }
        return buffer.withUnsafeBytes { raw -> Meta? in
            guard raw.loadUnaligned(fromByteOffset: 16, as: UInt32.self) == magic else { return nil }
            let pageSize = Int(raw.loadUnaligned(fromByteOffset: 40, as: UInt32.self))
            guard pageSize >= 512, pageSize <= 65536, pageSize & (pageSize - 1) == 0 else { return nil }
            return Meta(
                pageSize: pageSize,
                lastPage: raw.loadUnaligned(fromByteOffset: 136, as: UInt64.self),
                txnID: raw.loadUnaligned(fromByteOffset: 144, as: UInt64.self)
            )
        }
    }
}
