import Foundation
import Testing

@testable import SatchelSync

/// `Retry-After` in both of its forms (RFC 9110 §10.2.3), and the three HTTP date forms a
/// recipient must read.
@Suite("Retry-After and HTTP dates")
struct RetryAfterTests {
    static let url = URL(string: "http://127.0.0.1/x")!

    static func answer(_ retryAfter: String) -> SyncHTTPClient.Response {
        SyncHTTPClient.Response(status: 503, headers: ["retry-after": retryAfter], body: Data(), url: url)
    }

    @Test("the three date forms name the same instant; anything else is no date")
    func dates() {
        let instant = Date(timeIntervalSince1970: 784_111_777)  // 1994-11-06 08:49:37 UTC
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT") == instant)
        #expect(HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 GMT") == instant)
        #expect(HTTPDate.parse("Sun Nov  6 08:49:37 1994") == instant)
        #expect(HTTPDate.parse("Wed, 21 Oct 2015 07:28:00 GMT") == Date(timeIntervalSince1970: 1_445_412_480))
        for bad in [
            "", "Sun, 06 Nov 1994 08:49:37 UTC", "Sun, 06 Foo 1994 08:49:37 GMT", "Sun, 6 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 8:49:37 GMT",
            "Sun, 06 Nov 1994 08:49:37", "Sunday, 06-Nov-1994 08:49:37 GMT", "Sun,  06 Nov 1994 08:49:37 GMT", "Sun Nov 6 08:49:37 1994",
            "Sun, ٠٦ Nov 1994 08:49:37 GMT", "2015-10-21T07:28:00Z", "tomorrow",
        ] {
            #expect(HTTPDate.parse(bad) == nil, "\(bad)")
        }
    }

    @Test("Retry-After as seconds, or as a date: the wait until it (none for a date past); neither form is no wait asked")
    func retryAfter() {
        let now = Date(timeIntervalSince1970: 1_445_412_480 - 90)
        #expect(Self.answer("120").retryAfter(now: now) == .seconds(120))
        #expect(Self.answer("Wed, 21 Oct 2015 07:28:00 GMT").retryAfter(now: now) == .seconds(90))
        #expect(Self.answer("Wednesday, 21-Oct-15 07:28:00 GMT").retryAfter(now: now) == .seconds(90))
        #expect(Self.answer("Wed, 21 Oct 2015 07:26:00 GMT").retryAfter(now: now) == .zero)
        #expect(Self.answer("99999999999999999999999").retryAfter(now: now) == .seconds(Int64.max))
        for bad in ["-5", "1.5", "soon", " "] { #expect(Self.answer(bad).retryAfter(now: now) == nil, "\(bad)") }
    }
}
