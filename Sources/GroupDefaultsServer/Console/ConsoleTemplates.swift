import Mustache

/// The console's pages as Mustache templates (swift-mustache), compiled into the server so that
/// nothing is read from disk at run time. Every value is written with `{{…}}`, which escapes it
/// for HTML (`<`, `>`, `&`, `"`, `'`); no template uses `{{{…}}}` or `{{&…}}`, so no key, value or
/// name can add markup (a test reads the templates to keep it so).
package enum ConsoleTemplates {
    static let library: MustacheLibrary = {
        var library = MustacheLibrary()
        for (name, text) in sources {
            // The templates are constants of this file: one that does not parse is a programming error.
            do { try library.register(text, named: name) } catch { fatalError("console template \(name): \(error)") }
        }
        return library
    }()

    /// Renders `page` with the template `name`.
    static func render(_ page: Any, _ name: String) -> String {
        guard let html = library.render(page, withTemplate: name) else { fatalError("no console template \(name)") }
        return html
    }

    /// Every template's text, by name (the tests read them).
    package static let sources: [String: String] = [
        "header": header, "footer": footer, "sign-in": signIn, "error": error, "overview": overview, "account": account,
        "suite": suite, "history": history, "audit": audit,
    ]

    static let header = """
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>{{page.title}} · GroupDefaults console</title>
        <link rel="stylesheet" href="/console/assets/console.css">
        <script src="/console/assets/console.js" defer></script>
        </head>
        <body>
        <header class="bar">
        <a class="brand" href="/console">GroupDefaults console</a>
        {{#page.operatorName}}
        <a class="audit-link" href="/console/audit">Audit log</a>
        <span class="who">signed in as <strong>{{.}}</strong></span>
        <form id="sign-out" method="post" action="/console/sign-out">
        <input type="hidden" name="csrf" value="{{page.csrf}}">
        <button type="submit" class="link">Sign out</button>
        </form>
        {{/page.operatorName}}
        </header>
        <main>
        <nav class="trail">{{#page.trail}}<a href="{{href}}">{{text}}</a> › {{/page.trail}}</nav>
        <h1>{{page.title}}</h1>

        """

    static let footer = """

        </main>
        </body>
        </html>

        """

    static let signIn = """
        {{> header}}
        <section class="card narrow">
        {{#error}}<p class="error" role="alert">{{.}}</p>{{/error}}
        <form id="sign-in" method="post" action="/console/sign-in">
        <input type="hidden" name="csrf" value="{{page.csrf}}">
        <label>Name <input name="name" value="{{name}}" autocomplete="username" required autofocus></label>
        <label>Password <input name="password" type="password" autocomplete="current-password" required></label>
        <button type="submit">Sign in</button>
        </form>
        <p class="muted">Operators are made on the server: <code>groupdefaults-server admin create --name NAME</code>.</p>
        </section>
        {{> footer}}
        """

    static let error = """
        {{> header}}
        <section class="card narrow">
        <p class="error" role="alert">{{message}}</p>
        <p><a href="/console">Back to the overview</a></p>
        </section>
        {{> footer}}
        """

    static let overview = """
        {{> header}}
        <section class="tiles">
        <div class="tile"><span class="figure">{{accountCount}}</span> accounts</div>
        <div class="tile"><span class="figure">{{suites}}</span> suites</div>
        <div class="tile"><span class="figure">{{keys}}</span> keys</div>
        <div class="tile"><span class="figure">{{bytes}}</span> stored</div>
        <div class="tile"><span class="figure">{{devicesToday}}</span> devices seen in the last day</div>
        <div class="tile"><span class="figure">{{openStreams}}</span> open event streams</div>
        </section>
        <section class="charts">
        {{#pushesChart}}
        <figure class="chart">
        <svg id="{{id}}" viewBox="0 0 300 60" preserveAspectRatio="none" role="img" aria-label="{{label}}">
        <polyline points="{{points}}" fill="none" stroke="currentColor" stroke-width="1.5" vector-effect="non-scaling-stroke"/>
        </svg>
        <figcaption>{{label}}: {{latest}} in the last minute, at most {{maximum}}</figcaption>
        </figure>
        {{/pushesChart}}
        {{#streamsChart}}
        <figure class="chart">
        <svg id="{{id}}" viewBox="0 0 300 60" preserveAspectRatio="none" role="img" aria-label="{{label}}">
        <polyline points="{{points}}" fill="none" stroke="currentColor" stroke-width="1.5" vector-effect="non-scaling-stroke"/>
        </svg>
        <figcaption>{{label}}: {{latest}} now, at most {{maximum}}</figcaption>
        </figure>
        {{/streamsChart}}
        </section>
        <section id="health" class="card">
        <h2>Storage: {{health.backend}}</h2>
        <ul class="checks">
        {{#health.checks}}<li class="{{#ok}}ok{{/ok}}{{^ok}}bad{{/ok}}"><strong>{{name}}</strong>: {{#ok}}ok{{/ok}}{{^ok}}failing{{/ok}}. {{detail}}</li>
        {{/health.checks}}
        </ul>
        </section>
        <section class="card">
        <h2>Accounts</h2>
        <form class="inline" method="get" action="/console/accounts">
        <label>Open an account <input name="name" required></label> <button type="submit">Open</button>
        </form>
        <div class="scroll">
        <table id="accounts">
        <thead><tr><th>Account</th><th>Suites</th><th>Keys</th><th>Stored</th><th>Devices (day)</th><th>Active tokens</th></tr></thead>
        <tbody>
        {{#accounts}}<tr data-account="{{name}}"><td><a href="{{href}}">{{name}}</a></td><td>{{suites}}</td><td>{{keys}}</td><td>{{bytes}}</td><td>{{devicesToday}}</td><td>{{activeTokens}}</td></tr>
        {{/accounts}}
        {{^accounts}}<tr><td colspan="6" class="muted">No accounts yet: an account begins with its first token, <code>groupdefaults-server token create --account NAME</code>.</td></tr>{{/accounts}}
        </tbody>
        </table>
        </div>
        </section>
        {{> footer}}
        """

    static let account = """
        {{> header}}
        {{#newToken}}
        <section class="card notice" id="new-token-card">
        <p>The new token, shown this once: store it in a file now, and give the file to a device: <code id="new-token-hint">groupdefaults-sync configure SUITE --server {{serverURL}} --token-file PATH</code></p>
        <p class="secret"><code id="new-token">{{.}}</code> <button type="button" id="copy-token" data-copy="new-token">Copy</button></p>
        </section>
        {{/newToken}}
        {{#message}}<p class="notice" role="status">{{.}}</p>{{/message}}
        <section class="card">
        <h2>Suites</h2>
        <div class="scroll">
        <table id="suites">
        <thead><tr><th>Suite</th><th>Keys</th><th>Stored</th><th>Quota</th><th>Revision</th></tr></thead>
        <tbody>
        {{#suites}}<tr data-suite="{{name}}"><td><a href="{{href}}">{{name}}</a></td><td>{{keys}} of {{maxKeys}}</td><td>{{bytes}}</td>
        <td><meter min="0" max="{{maxBytes}}" value="{{byteCount}}" title="{{bytes}} of {{maxBytesText}}">{{bytes}} of {{maxBytesText}}</meter></td><td>{{headRev}}</td></tr>
        {{/suites}}
        {{^suites}}<tr><td colspan="5" class="muted">No suite written yet.</td></tr>{{/suites}}
        </tbody>
        </table>
        </div>
        </section>
        <section class="card">
        <h2>Devices</h2>
        <div class="scroll">
        <table id="devices">
        <thead><tr><th>Device</th><th>Last seen</th><th>Last push</th><th>First seen</th><th>Suites</th><th>Token</th><th></th></tr></thead>
        <tbody>
        {{#devices}}<tr data-device-id="{{id}}"{{#revoked}} class="revoked"{{/revoked}}>
        <td class="device-name">{{name}}<br><small class="muted">{{id}} · store {{deviceID}}</small></td>
        <td class="last-seen"><time datetime="{{lastSeen.iso}}">{{lastSeen.text}}</time></td>
        <td>{{#lastPush}}<time datetime="{{iso}}">{{text}}</time>{{/lastPush}}{{^lastPush}}never{{/lastPush}}</td>
        <td><time datetime="{{firstSeen.iso}}">{{firstSeen.text}}</time></td>
        <td>{{suites}}</td><td><code>{{tokenID}}</code></td>
        <td>{{^revoked}}<form class="revoke-device" method="post" action="{{revokeHref}}"><input type="hidden" name="csrf" value="{{page.csrf}}"><button type="submit" class="danger">Revoke device</button></form>{{/revoked}}{{#revoked}}revoked{{/revoked}}</td></tr>
        {{/devices}}
        {{^devices}}<tr><td colspan="7" class="muted">No device has synced with this account yet.</td></tr>{{/devices}}
        </tbody>
        </table>
        </div>
        <p class="muted">Revoking a device revokes its token: every device sharing that token loses access too.</p>
        </section>
        <section class="card">
        <h2>Tokens</h2>
        <div class="scroll">
        <table id="tokens">
        <thead><tr><th>Token</th><th>Device</th><th>Suites</th><th>Access</th><th>Created</th><th>Expires</th><th></th></tr></thead>
        <tbody>
        {{#tokens}}<tr data-token-id="{{id}}"{{#revoked}} class="revoked"{{/revoked}}><td><code>{{id}}</code></td><td>{{#device}}{{.}}{{/device}}{{^device}}any{{/device}}</td>
        <td>{{patterns}}</td><td>{{#readOnly}}read-only{{/readOnly}}{{^readOnly}}read-write{{/readOnly}}</td>
        <td><time datetime="{{created.iso}}">{{created.text}}</time></td>
        <td>{{#expires}}<time datetime="{{iso}}">{{text}}</time>{{/expires}}{{^expires}}never{{/expires}}</td>
        <td>{{#revoked}}revoked <time datetime="{{iso}}">{{text}}</time>{{/revoked}}{{^revoked}}<form class="revoke-token" method="post" action="{{revokeHref}}"><input type="hidden" name="csrf" value="{{page.csrf}}"><button type="submit" class="danger">Revoke</button></form>{{/revoked}}</td></tr>
        {{/tokens}}
        {{^tokens}}<tr><td colspan="7" class="muted">No tokens.</td></tr>{{/tokens}}
        </tbody>
        </table>
        </div>
        <form id="create-token" method="post" action="{{createHref}}" class="stack">
        <input type="hidden" name="csrf" value="{{page.csrf}}">
        <h3>Create a token</h3>
        <label>Device name (optional) <input name="device" placeholder="ana-phone"></label>
        <label>Suites (patterns, comma-separated) <input name="suites" value="*" required></label>
        <label class="check"><input type="checkbox" name="read_only" value="on"> Read-only</label>
        <button type="submit">Create token</button>
        </form>
        </section>
        {{> footer}}
        """

    static let suite = """
        {{> header}}
        <section class="card">
        <form id="filter" method="get" action="{{href}}" class="inline">
        <label>Keys containing <input name="key" value="{{filter}}"></label> <button type="submit">Filter</button>
        </form>
        <p class="muted">{{shown}} of {{total}} keys{{#truncated}} (the first ones only: filter to see others){{/truncated}} · revision {{headRev}}</p>
        <div class="scroll">
        <table id="keys">
        <thead><tr><th>Key</th><th>Value</th><th>Last writer</th><th>Written</th><th>Revision</th></tr></thead>
        <tbody>
        {{#keys}}<tr data-key="{{key}}"{{#deleted}} class="deleted"{{/deleted}}><td class="key"><a href="{{historyHref}}">{{key}}</a></td>
        <td class="value"><pre>{{value}}</pre></td><td class="writer">{{writer}}</td>
        <td class="written"><time datetime="{{written.iso}}">{{written.text}}</time></td><td class="rev">{{rev}}</td></tr>
        {{/keys}}
        {{^keys}}<tr><td colspan="5" class="muted">{{#holdsNoKeys}}This suite holds no keys.{{/holdsNoKeys}}{{^holdsNoKeys}}No keys containing “{{filter}}”.{{/holdsNoKeys}}</td></tr>{{/keys}}
        </tbody>
        </table>
        </div>
        </section>
        <section class="card" id="sharing">
        <h2>Sharing</h2>
        {{#message}}<p class="notice" role="status" id="sharing-done">{{.}}</p>{{/message}}
        {{#rotationDue}}<p class="notice" id="rotation-due">{{.}}</p>{{/rotationDue}}
        <p>Owner: <a href="{{accountHref}}">{{account}}</a>.{{^isShared}} No other account shares this suite.{{/isShared}}</p>
        {{#isShared}}
        <div class="scroll">
        <table id="members">
        <thead><tr><th>Member</th><th>Role</th><th>Joined</th><th></th></tr></thead>
        <tbody>
        {{#members}}<tr data-member="{{account}}"><td><a href="{{href}}">{{account}}</a></td><td class="role">{{role}}</td>
        <td><time datetime="{{added.iso}}">{{added.text}}</time></td>
        <td><form class="remove-member inline" method="post" action="{{removeAction}}">
        <input type="hidden" name="csrf" value="{{page.csrf}}"><button type="submit" class="danger">Remove</button></form></td></tr>
        {{/members}}
        </tbody>
        </table>
        </div>
        {{/isShared}}
        {{#hasPins}}<p id="pinned">Pinned for the members (only the owner's devices change them):
        {{#pinned}}<code class="pin">{{.}}</code> {{/pinned}}</p>{{/hasPins}}
        {{#hasInvitations}}
        <h3>Invitations</h3>
        <div class="scroll">
        <table id="invitations">
        <thead><tr><th>Invitation</th><th>Role</th><th>State</th><th>Made by</th><th>Accepted by</th><th>Until</th></tr></thead>
        <tbody>
        {{/hasInvitations}}
        {{#invitations}}<tr><td><code>{{id}}</code></td><td>{{role}}</td><td class="state">{{state}}</td><td>{{createdBy}}</td><td>{{acceptedBy}}</td>
        <td><time datetime="{{expires.iso}}">{{expires.text}}</time></td></tr>
        {{/invitations}}
        {{#hasInvitations}}
        </tbody>
        </table>
        </div>
        {{/hasInvitations}}
        </section>
        <section class="card">
        <h2>Live changes <span id="tail-status" class="muted" role="status">connecting…</span></h2>
        <div class="scroll">
        <table id="tail" data-source="{{tailHref}}">
        <thead><tr><th>Key</th><th>Value</th><th>Writer</th><th>Written</th><th>Revision</th></tr></thead>
        <tbody id="tail-rows" aria-live="polite" aria-relevant="additions"></tbody>
        </table>
        </div>
        <p class="muted">Changes pushed while this page is open appear here (needs JavaScript; reload the page without it).</p>
        </section>
        {{> footer}}
        """

    static let history = """
        {{> header}}
        <section class="card">
        <p>Versions of <code>{{key}}</code> the server keeps, newest first. <a href="{{suiteHref}}">Back to the suite</a></p>
        <div class="scroll">
        <table id="history">
        <thead><tr><th>Value</th><th>Writer</th><th>Written</th><th>Received</th><th>Revision</th></tr></thead>
        <tbody>
        {{#versions}}<tr{{#deleted}} class="deleted"{{/deleted}}><td class="value"><pre>{{value}}</pre></td><td class="writer">{{writer}}</td>
        <td class="written"><time datetime="{{written.iso}}">{{written.text}}</time></td>
        <td><time datetime="{{received.iso}}">{{received.text}}</time></td><td class="rev">{{rev}}</td></tr>
        {{/versions}}
        {{^versions}}<tr><td colspan="5" class="muted">The server keeps no version of this key: never written, purged, or history is off.</td></tr>{{/versions}}
        </tbody>
        </table>
        </div>
        </section>
        {{> footer}}
        """

    static let audit = """
        {{> header}}
        <section class="card">
        <p>Administrative acts, newest first (the last {{shown}}{{#before}} before {{.}}{{/before}}{{#account}}, of account <code>{{.}}</code>{{/account}}): \
        who did what, when and from where. Kept {{days}} days.</p>
        <form method="get" action="/console/audit"><label>Account <input name="account" value="{{account}}"></label> <button type="submit">Filter</button></form>
        <div class="scroll">
        <table id="audit">
        <thead><tr><th>When</th><th>Act</th><th>Account</th><th>Target</th><th>By</th><th>From</th><th>Outcome</th></tr></thead>
        <tbody>
        {{#records}}<tr><td><time datetime="{{time.iso}}">{{time.text}}</time></td><td class="act">{{act}}</td><td>{{account}}</td>
        <td>{{target}}</td><td class="actor">{{actor}}</td><td>{{source}}</td><td>{{outcome}}</td></tr>
        {{/records}}
        {{^records}}<tr><td colspan="7" class="muted">Nothing recorded.</td></tr>{{/records}}
        </tbody>
        </table>
        </div>
        <p class="pages">{{#latest}}<a class="latest" href="{{.}}">Latest records</a> {{/latest}}\
        {{#earlier}}<a class="earlier" href="{{.}}">Earlier records</a>{{/earlier}}</p>
        </section>
        {{> footer}}
        """
}
