import Foundation
import GroupDefaultsWire
import Synchronization

/// Records the devices that push and pull: a request whose token and device id (the push's
/// `device_id`, else the `Device-ID` header) this instance has not recorded yet, for this suite, is
/// written to storage before it is answered; after that, at most one write per device every
/// `interval` (last seen, last push), so that a device's pulls cost storage nothing most of the
/// time. Requests that name no device are not recorded.
final class DeviceTracker: Sendable {
    private struct Recorded {
        var suites: Set<String>
        var written: ContinuousClock.Instant
        var pushWritten: ContinuousClock.Instant?
    }

    let storage: any SyncStorage
    let interval: Duration
    private let recorded = Mutex<[String: Recorded]>([:])

    init(storage: any SyncStorage, interval: Duration = .seconds(10)) {
        self.storage = storage
        self.interval = interval
    }

    /// Notes that `deviceID`, with `token`, used `suite` (pushing, if `push`), and records it when due.
    func seen(token: StoredToken, deviceID: UInt64?, suite: String, push: Bool, now: ContinuousClock.Instant = .now) async throws {
        guard let deviceID else { return }
        let id = StoredDevice.id(account: token.account, tokenID: token.id, deviceID: deviceID)
        let due = recorded.withLock { recorded -> Bool in
            if let entry = recorded[id], entry.suites.contains(suite), now - entry.written < interval,
               !push || entry.pushWritten.map({ now - $0 < interval }) == true {
                return false
            }
            var entry = recorded[id] ?? Recorded(suites: [], written: now)
            entry.suites.insert(suite)
            entry.written = now
            if push { entry.pushWritten = now }
            recorded[id] = entry
            return true
        }
        guard due else { return }
        let milliseconds = HLC.wallClockMilliseconds()
        do {
            try await storage.recordDevice(StoredDevice(
                account: token.account, tokenID: token.id, name: token.device, deviceID: deviceID, firstSeen: milliseconds,
                lastSeen: milliseconds, lastPush: push ? milliseconds : nil, suites: [suite]))
        } catch {
            _ = recorded.withLock { $0.removeValue(forKey: id) }  // written by the next request instead
            throw error
        }
    }
}
