import Foundation
import GroupDefaultsServer
import Testing

/// `SignInThrottle` where addresses are cheap: an IPv6 /64 is one client for the limits and the
/// queue, and forgetting the oldest of many counts costs little.
@Suite("Sign-in throttle: address groups and eviction")
struct SignInThrottleTests {
    @Test(
        "IPv6 addresses of one /64 share the failure limits and the attempts under way; another /64 and IPv4 do not; an IPv4-mapped address is the IPv4 one"
    )
    func ipv6NetworksAreOneClient() {
        #expect(AddressGroup("2001:db8:0:1:aaaa::7").description == "2001:db8:0:1::/64")
        #expect(AddressGroup("::ffff:192.0.2.1").description == "192.0.2.1")
        #expect(AddressGroup("192.0.2.1").description == "192.0.2.1")
        #expect(AddressGroup("unknown").description == "unknown")

        let throttle = SignInThrottle(failures: 3, window: .seconds(600))
        func isRefused(_ admission: SignInThrottle.Admission) -> Bool {
            if case .refused = admission { true } else { false }
        }
        // Three failures for `ops`, each from another address of one /64.
        for n in 1...3 {
            let address = "2001:db8:0:1::\(n)"
            #expect(throttle.admit(address: address, name: "ops") == .admitted)
            throttle.finished(address: address, name: "ops", succeeded: false)
        }
        #expect(isRefused(throttle.admit(address: "2001:db8:0:1:ffff::1", name: "ops")), "a fresh address of the /64 is refused too")
        #expect(throttle.admit(address: "2001:db8:0:2::1", name: "ops") == .admitted, "another /64 is not")
        throttle.finished(address: "2001:db8:0:2::1", name: "ops", succeeded: true)

        // Attempts under way: four per /64, whatever the addresses.
        for n in 1...4 { #expect(throttle.admit(address: "2001:db8:0:3::\(n)", name: "x\(n)") == .admitted) }
        #expect(throttle.admit(address: "2001:db8:0:3::99", name: "y") == .busy)
        #expect(throttle.admit(address: "2001:db8:0:4::1", name: "y") == .admitted)
        // IPv4 as IPv6 is the IPv4 address.
        for _ in 0..<3 {
            #expect(throttle.admit(address: "::ffff:198.51.100.7", name: "ops") == .admitted)
            throttle.finished(address: "::ffff:198.51.100.7", name: "ops", succeeded: false)
        }
        #expect(isRefused(throttle.admit(address: "198.51.100.7", name: "ops")))
    }

    @Test("the password checks' turns are per /64: a flood from many addresses of one /64 waits behind itself, another client's check is next")
    func turnsPerNetwork() async throws {
        let throttle = SignInThrottle()
        let (order, served) = AsyncStream<String>.makeStream()
        let (started, holding) = AsyncStream<Void>.makeStream()
        // Four checks that hold every slot, each until its stream ends.
        let releases = (0..<4).map { _ in AsyncStream<Void>.makeStream() }
        let holders = releases.enumerated().map { n, release in
            Task {
                try await throttle.check(address: "2001:db8:0:9::\(n + 1)") {
                    holding.yield()
                    for await _ in release.stream {}
                }
            }
        }
        var running = 0
        for await _ in started {
            running += 1
            if running == 4 { break }
        }
        // Eight attempts waiting from eight addresses of one /64, then one from elsewhere.
        var waiters = (0..<8).map { n in Task { try await throttle.check(address: "2001:db8:0:1::\(n + 1)") { _ = served.yield("flood") } } }
        try await waitUntil { throttle.waitingChecks == 8 }
        waiters.append(Task { try await throttle.check(address: "192.0.2.1") { _ = served.yield("other") } })
        try await waitUntil { throttle.waitingChecks == 9 }
        // One slot comes free: the flood's first attempt, then, in turn, the other client's.
        releases[0].continuation.finish()
        var first: [String] = []
        for await who in order {
            first.append(who)
            if first.count == 2 { break }
        }
        #expect(first == ["flood", "other"], "\(first)")
        for release in releases { release.continuation.finish() }
        for holder in holders { try await holder.value }
        for waiter in waiters { try await waiter.value }
    }

    @Test("past maxTracked counts the oldest windows are forgotten first, each in a constant step: 60,000 addresses in a few seconds at most")
    func evictionIsCheap() {
        let small = SignInThrottle(failures: 1, window: .seconds(600), maxTracked: 4)
        func fail(_ throttle: SignInThrottle, _ address: String) {
            #expect(throttle.admit(address: address, name: "ops") == .admitted)
            throttle.finished(address: address, name: "ops", succeeded: false)
        }
        // Two counts per address (name and address, address alone): the fourth address's pushes out the first's.
        for n in 1...3 { fail(small, "192.0.2.\(n)") }
        #expect(small.admit(address: "192.0.2.1", name: "ops") == .admitted, "the oldest is forgotten")
        small.finished(address: "192.0.2.1", name: "ops", succeeded: false)
        #expect(small.admit(address: "192.0.2.1", name: "ops") != .admitted, "counted anew")
        #expect(small.admit(address: "192.0.2.3", name: "ops") != .admitted, "the latest is kept")

        let throttle = SignInThrottle()
        let clock = ContinuousClock()
        let spent = clock.measure {
            for n in 0..<60_000 {
                let address = "10.\(n >> 16).\((n >> 8) & 255).\(n & 255)"
                _ = throttle.admit(address: address, name: "ops")
                throttle.finished(address: address, name: "ops", succeeded: false)
            }
        }
        #expect(spent < .seconds(3), "60,000 sign-ins took \(spent)")
    }

    /// Polls `condition` every 10 ms for up to 5 s.
    private func waitUntil(_ condition: () -> Bool) async throws {
        for _ in 0..<500 {
            if condition() { return }
            try await Task.sleep(for: .milliseconds(10))
        }
        Issue.record("the condition never held")
    }
}
