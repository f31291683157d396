import Foundation
import GroupDefaultsWire
import Synchronization

/// Records the devices that push and pull. A request whose token and device id (the push's
/// `device_id`, else the `Device-ID` header) this instance has not yet recorded for its suite is
/// written to storage before it is answered; later sightings of the device are merged in memory
/// and written together at most once per `interval` (last seen, last push), so that a device's
/// requests cost storage one small write a second at most, and a device list is at most
/// `interval` behind. Requests that name no device are not recorded.
final class DeviceTracker: Sendable {
    private struct State {
        /// The suites recorded per device id.
        var recorded: [String: Set<String>] = [:]
        /// Sightings not written yet, per device id.
        var pending: [String: StoredDevice] = [:]
        var flushScheduled = false
    }

    let storage: any SyncStorage
    let interval: Duration
    private let state = Mutex(State())

    init(storage: any SyncStorage, interval: Duration = .seconds(1)) {
        self.storage = storage
        self.interval = interval
    }

    /// Notes that `deviceID`, with `token`, used `suite` (pushing, if `push`), and records it when due.
    ///
    /// - Throws: storage's error when a first sighting cannot be recorded.
    func seen(token: StoredToken, deviceID: UInt64?, suite: String, push: Bool) async throws {
        guard let deviceID else { return }
        let milliseconds = HLC.wallClockMilliseconds()
        let sighting = StoredDevice(
            account: token.account, tokenID: token.id, name: token.device, deviceID: deviceID, firstSeen: milliseconds,
            lastSeen: milliseconds, lastPush: push ? milliseconds : nil, suites: [suite])
        let id = sighting.id
        enum Next { case write, scheduleFlush, nothing }
        let next = state.withLock { state -> Next in
            if state.recorded[id]?.contains(suite) == true {
                state.pending[id] = state.pending[id].map { $0.merged(with: sighting) } ?? sighting
                if state.flushScheduled { return .nothing }
                state.flushScheduled = true
                return .scheduleFlush
            }
            state.recorded[id, default: []].insert(suite)
            return .write
        }
        switch next {
        case .write:
            do {
                try await storage.recordDevice(sighting)
            } catch {
                state.withLock { _ = $0.recorded[id]?.remove(suite) }  // written by the next request instead
                throw error
            }
        case .scheduleFlush:
            let interval = self.interval
            Task {
                try? await Task.sleep(for: interval)
                await self.flush()
            }
        case .nothing:
            break
        }
    }

    /// Writes the sightings merged since the last write.
    func flush() async {
        let pending = state.withLock { state in
            defer {
                state.pending = [:]
                state.flushScheduled = false
            }
            return Array(state.pending.values)
        }
        // Bookkeeping: a sighting that cannot be written now is superseded by the device's next one.
        for sighting in pending { try? await storage.recordDevice(sighting) }
    }
}
