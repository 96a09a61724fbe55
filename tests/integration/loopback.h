// Raw TCP sockets on 127.0.0.1 for tests of what listens there: free ports,
// listeners that never accept, plain clients.
#ifndef WEFT_TESTS_INTEGRATION_LOOPBACK_H_
#define WEFT_TESTS_INTEGRATION_LOOPBACK_H_

namespace weft::testing {

// A loopback port nothing listens on right now (bound, read, closed), never
// one this process was given before.
int FreePort();
// A socket bound to a free loopback port, written to |port|; it listens
// with |backlog| unless that is negative. The caller closes it.
int RawListener(int backlog, int* port);
// A connected socket to 127.0.0.1:|port|, or -1.
int RawConnect(int port);

}  // namespace weft::testing

#endif  // WEFT_TESTS_INTEGRATION_LOOPBACK_H_
