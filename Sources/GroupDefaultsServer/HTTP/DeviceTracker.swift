import Foundation
import GroupDefaultsWire
import Logging
import Synchronization

/// Records the devices that push and pull. A request whose token and device id (the push's
/// `device_id`, else the `Device-ID` header) this instance has not yet recorded for its suite is
/// written to storage before it is answered; later sightings of the device (each request, and
/// each turn of an open event stream, at least every heartbeat) are merged in memory and written
/// together at most once per `interval`, `sightingsPerWrite` devices' in one write, so that a
/// device's requests and open streams cost storage a share of one write a second and a device
/// list is at most `interval` behind. Requests that name no device are not recorded, nor new
/// devices of a token that already has `maximumDevicesPerToken` (a client chooses its device id:
/// this bounds what one token can make the server keep).
///
/// Recording is bookkeeping: a failure to write is logged and never fails the request. Sightings
/// merged but not yet written when the server stops are written before storage closes (`close`);
/// those of a token that is gone by the time they would be written are not (its account was
/// deleted: a stream's last turn must not bring its device back).
package final class DeviceTracker: Sendable {
    private struct State {
        /// The suites recorded per device.
        var recorded: [StoredDevice.Identity: Set<ExactName>] = [:]
        /// How many devices each token has (by token id).
        var devicesPerToken: [String: Int] = [:]
        /// Sightings not written yet.
        var pending: [StoredDevice.Identity: StoredDevice] = [:]
        var flushScheduled = false
        /// After `close`, sightings are not recorded: storage is closing.
        var closed = false
        /// Writes under way (a first sighting's, or a flush), and who waits for them all to end.
        var writing = 0
        var drained: [CheckedContinuation<Void, Never>] = []
    }

    static let maximumDevicesPerToken = 1_000
    /// The most sightings one write holds. The embedded store's pushes wait behind its writes: with
    /// all of 10,000 idle streams' sightings in one commit, wake-up p99 reached 149 ms in a run of
    /// `groupdefaults-bench server --streams 10000` (4.7–6.6 ms with 50 per write); a commit each
    /// cost a flush each.
    static let sightingsPerWrite = 50

    let storage: any DeviceStore & TokenStore
    let interval: Duration
    let logger: Logger
    private let state = Mutex(State())

    init(storage: any DeviceStore & TokenStore, interval: Duration = .seconds(1), logger: Logger = Logger(label: "groupdefaults-server")) {
        self.storage = storage
        self.interval = interval
        self.logger = logger
    }

    /// Notes that `deviceID`, with `token`, used `suite` (pushing, if `push`), and records it when due.
    func seen(token: StoredToken, deviceID: UInt64?, suite: String, push: Bool) async {
        guard let deviceID else { return }
        let milliseconds = HLC.wallClockMilliseconds()
        let sighting = StoredDevice(
            account: token.account,
            tokenID: token.id,
            name: token.device,
            deviceID: deviceID,
            firstSeen: milliseconds,
            lastSeen: milliseconds,
            lastPush: push ? milliseconds : nil,
            suites: [suite]
        )
        let identity = sighting.identity
        enum Next { case write, scheduleFlush, nothing }
        let next = state.withLock { state -> Next in
            if state.closed { return .nothing }
            if let suites = state.recorded[identity], suites.contains(suite.exact) {
                state.pending[identity] = state.pending[identity].map { $0.merged(with: sighting) } ?? sighting
                if state.flushScheduled { return .nothing }
                state.flushScheduled = true
                return .scheduleFlush
            }
            if state.recorded[identity] == nil {
                guard state.devicesPerToken[token.id, default: 0] < Self.maximumDevicesPerToken else { return .nothing }
                state.devicesPerToken[token.id, default: 0] += 1
            }
            state.recorded[identity, default: []].insert(suite.exact)
            state.writing += 1
            return .write
        }
        switch next {
        case .write:
            do {
                try await storage.recordDevice(sighting)
            } catch {
                state.withLock { _ = $0.recorded[identity]?.remove(suite.exact) }  // written by the next request instead
                logger.warning("recording device \(sighting.id) failed: \(error)")
            }
            wrote()
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

    /// Writes the sightings not written yet, records none after, and returns once every write
    /// under way has ended: the server has stopped, and storage closes next. An unreachable
    /// database holds shutdown up for one storage timeout per flush under way (once the tracker
    /// is closed, a flush stops at its first failed write).
    func close() async {
        state.withLock { $0.closed = true }
        await flush()
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let drained = state.withLock { state in
                if state.writing > 0 { state.drained.append(continuation) }
                return state.writing == 0
            }
            if drained { continuation.resume() }
        }
    }

    /// Writes the sightings merged since the last write.
    func flush() async {
        let pending = state.withLock { state in
            defer {
                state.pending = [:]
                state.flushScheduled = false
            }
            state.writing += 1
            return Array(state.pending.values)
        }
        defer { wrote() }
        for start in stride(from: 0, to: pending.count, by: Self.sightingsPerWrite) {
            let some = Array(pending[start..<min(start + Self.sightingsPerWrite, pending.count)])
            do {
                // One commit, one statement. `recordDevices` writes nothing for a token that is gone
                // (its own transaction checks).
                try await storage.recordDevices(some)
            } catch {
                // Superseded by each device's next sighting; storage that fails at stop is not waited for again.
                logger.warning("recording \(some.count) device sightings failed: \(error)")
                if state.withLock({ $0.closed }) { return }
            }
        }
    }

    /// A write (`seen`'s, or a flush) has ended; at the last, whoever waits in `close` goes on.
    private func wrote() {
        let drained = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.writing -= 1
            guard state.writing == 0 else { return [] }
            defer { state.drained = [] }
            return state.drained
        }
        for continuation in drained { continuation.resume() }
    }
}
