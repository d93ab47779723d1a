#ifndef PACELINE_SERVER_DAEMON_H_
#define PACELINE_SERVER_DAEMON_H_

// pacelined: reads the command line and config, loads the model, starts
// the engine thread, the pacer, the intake pool, the gRPC server, the HTTP
// API and the metrics endpoint, then waits for SIGTERM / SIGINT and drains:
//
//   1. health -> NOT_SERVING, new calls -> UNAVAILABLE (HTTP 503), systemd
//      STOPPING=1;
//   2. accepted requests finish generating and their streams finish
//      delivering (paced ones at their pace) until drain_timeout_seconds;
//   3. what is left is cut: its requests cancelled, its calls ended with
//      ABORTED (their last messages get 1 s);
//   4. the servers shut down; exit 0 within the timeout plus 2 s, whatever
//      is open.
//
// While it serves, once a second it cuts calls older than
// max_stream_seconds and gives free memory back to the system when there
// is some (memory_trim.h).
//
// Start-up prints the model, the memory plan and each address it bound
// (also for port 0) to stderr: "pacelined: http on HOST:PORT" (the HTTP
// API, unless turned off), "pacelined: metrics on HOST:PORT/metrics" (with
// metrics_listen), "pacelined: listening on HOST:PORT" (gRPC); then
// "pacelined: ready", and tells systemd READY=1. A bad flag, config or
// model fails start-up with exit code 2 (usage/config) or 1 (model, bind),
// before anything listens.

#include <span>
#include <string>

namespace paceline::server {

// Runs the daemon on `args` (argv without argv[0]); returns the exit code.
int RunDaemon(std::span<const std::string> args);

}  // namespace paceline::server

#endif  // PACELINE_SERVER_DAEMON_H_
