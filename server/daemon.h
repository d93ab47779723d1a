#ifndef PACELINE_SERVER_DAEMON_H_
#define PACELINE_SERVER_DAEMON_H_

// pacelined: reads the command line and config, loads the model, starts the
// engine thread, the pacer and the gRPC server, then waits for SIGTERM /
// SIGINT and drains:
//
//   1. health -> NOT_SERVING, new RPCs -> UNAVAILABLE, systemd STOPPING=1;
//   2. accepted requests finish generating and their streams finish
//      delivering (paced ones at their pace) until the drain timeout;
//   3. what is left is cut: its requests cancelled, its streams ended with
//      ABORTED;
//   4. the server shuts down; exit 0.
//
// Start-up prints the model, the memory plan and the addresses to stderr:
// with metrics_listen, "pacelined: metrics on HOST:PORT/metrics" (the
// Prometheus scrape endpoint), then "pacelined: listening on HOST:PORT"
// (the bound ports, also for port 0) and "pacelined: ready", and tells
// systemd READY=1. A bad flag, config
// or model fails start-up with exit code 2 (usage/config) or 1 (model,
// bind), before anything listens.

#include <span>
#include <string>

namespace paceline::server {

// Runs the daemon on `args` (argv without argv[0]); returns the exit code.
int RunDaemon(std::span<const std::string> args);

}  // namespace paceline::server

#endif  // PACELINE_SERVER_DAEMON_H_
