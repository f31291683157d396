import Foundation

/// Single-op writes driven by `wrk` (Debian's, a C load generator with LuaJIT scripts), the same
/// client with the same connection counts for our pushes and for etcd's puts: a client that keeps
/// up with either server on its share of the two cores (the report prints the cores it used).
///
/// Each wrk thread is one device writing keys of its own (`t<thread>-<n>`, cycling through
/// `keysPerThread`), a request after another on each of its connections.
struct WrkLoad {
    static let executable = "/usr/bin/wrk"

    enum Target {
        /// `POST /v1/suites/SUITE/push`, one op with the current HLC (LuaJIT's FFI reads the clock).
        case push(suite: String, token: String)
        /// etcd's JSON gateway, `POST /v3/kv/put`, keys and the value in base64.
        case etcdPut
    }

    let target: Target
    let connections: Int
    let keysPerThread = 1_000
    /// The value of every write: 60 bytes, the size of the other server rows.
    static let value = String(repeating: "v", count: 60)

    var threads: Int { min(2, connections) }

    struct Result {
        var requestsPerSecond: Double
        var requests: Int
        var p50Microseconds: Double
        var p99Microseconds: Double
        /// Cores busy while the counted run ran.
        var usage: Usage
    }

    /// Runs wrk against `baseURL` for `seconds` (after a one-second warm-up run that is not
    /// counted, nor metered by `meter`); throws if any request failed or was not answered 200.
    func run(baseURL: String, seconds: Int, scratch: String, meter: UsageMeter) throws -> Result {
        let script = scratch + "/wrk-\(target.name)-\(connections).lua"
        try luaScript().write(toFile: script, atomically: true, encoding: .utf8)
        _ = try runOnce(baseURL: baseURL, seconds: 1, script: script, meter: meter)
        return try runOnce(baseURL: baseURL, seconds: seconds, script: script, meter: meter)
    }

    private func runOnce(baseURL: String, seconds: Int, script: String, meter: UsageMeter) throws -> Result {
        let usage = meter.start()
        let run = String(UInt32.random(in: .min ... .max), radix: 36)  // batch ids unique across runs on one suite
        let result = try Spawn.run(
            Self.executable,
            [
                "-t", String(threads), "-c", String(connections), "-d", "\(seconds)s", "--timeout", "10s",
                "-s", script, baseURL, "--", run,
            ],
            captureOutput: true
        )
        guard result.status == 0,
            let line = result.output.split(separator: "\n").last(where: { $0.hasPrefix("{") }),
            let summary = try? JSONDecoder().decode(Summary.self, from: Data(line.utf8))
        else { throw BenchError("wrk failed (exit \(result.status)): \(result.output)") }
        guard summary.status_errors == 0, summary.socket_errors == 0 else {
            throw BenchError(
                "wrk against \(target.name): \(summary.status_errors) answers were not 200 and "
                    + "\(summary.socket_errors) requests failed on the socket; its output: \(result.output)"
            )
        }
        return Result(
            requestsPerSecond: Double(summary.requests) / (Double(summary.duration_us) / 1e6),
            requests: summary.requests,
            p50Microseconds: summary.p50_us,
            p99Microseconds: summary.p99_us,
            usage: usage.stop()
        )
    }

    /// What the script's `done` prints, one JSON line.
    private struct Summary: Decodable {
        var requests: Int
        var duration_us: Int
        var status_errors: Int
        var socket_errors: Int
        var p50_us: Double
        var p99_us: Double
    }

    /// The Lua script: `setup` numbers the threads, `request` builds each request, `done` prints
    /// the summary as JSON.
    private func luaScript() -> String {
        let common = """
            local threads = 0
            function setup(thread)
              threads = threads + 1
              thread:set("tid", threads)
            end
            local counter = 0
            local run = ""
            function init(args) run = args[1] end
            function done(summary, latency, requests)
              local e = summary.errors
              io.write(string.format('{"requests":%d,"duration_us":%d,"status_errors":%d,"socket_errors":%d,"p50_us":%d,"p99_us":%d}\\n',
                summary.requests, summary.duration, e.status, e.connect + e.read + e.write + e.timeout,
                latency:percentile(50), latency:percentile(99)))
            end

            """
        switch target {
        case .push(let suite, let token):
            return common + """
                local ffi = require("ffi")
                ffi.cdef[[
                typedef struct { int64_t tv_sec; int64_t tv_usec; } gd_timeval;
                int gettimeofday(gd_timeval *tv, void *tz);
                ]]
                local now = ffi.new("gd_timeval")
                local headers = { ["Authorization"] = "Bearer \(token)", ["Content-Type"] = "application/json" }
                local prefix = '"ops":[{"value":{"string":"\(Self.value)"},"key":"t'
                function request()
                  counter = counter + 1
                  ffi.C.gettimeofday(now, nil)
                  -- HLC: milliseconds << 16 | counter, a 64-bit integer (LuaJIT's int64 cdata)
                  local hlc = (now.tv_sec * 1000 + now.tv_usec / 1000) * 65536 + counter % 65536
                  local body = '{"device_id":"' .. tid .. '","batch_id":"' .. run .. '-' .. tid .. '-' .. counter .. '",'
                    .. prefix .. tid .. '-' .. (counter % \(keysPerThread)) .. '","hlc":"' .. tostring(hlc):match("^%-?%d+") .. '"}]}'
                  return wrk.format("POST", "/v1/suites/\(suite)/push", headers, body)
                end

                """
        case .etcdPut:
            // Keys and the value in base64, as the gateway wants them, computed here once.
            let value = Data(Self.value.utf8).base64EncodedString()
            let keys = (1...threads).map { thread in
                "{"
                    + (0..<keysPerThread).map { "\"" + Data("bench/t\(thread)-\($0)".utf8).base64EncodedString() + "\"" }
                    .joined(separator: ",") + "}"
            }
            return common + """
                local keys = { \(keys.joined(separator: ",\n")) }
                local headers = { ["Content-Type"] = "application/json" }
                function request()
                  counter = counter + 1
                  local body = '{"key":"' .. keys[tid][counter % \(keysPerThread) + 1] .. '","value":"\(value)"}'
                  return wrk.format("POST", "/v3/kv/put", headers, body)
                end

                """
        }
    }
}

extension WrkLoad.Target {
    var name: String {
        switch self {
        case .push: "push"
        case .etcdPut: "etcd-put"
        }
    }
}
