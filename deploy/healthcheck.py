#!/usr/bin/env python3
"""gRPC health probe for fuserank (the container image's HEALTHCHECK).

Calls grpc.health.v1.Health/Check and exits 0 when the server answers SERVING, 1 for any
other answer or no answer (Docker's healthy / unhealthy). The two health messages are
encoded by hand (field 1 of each), so only python3-grpcio is needed: no generated stubs,
no protobuf package, no grpc_health_probe binary (neither Debian nor Ubuntu packages one).

  fuserank-healthcheck --addr 127.0.0.1:8700 [--service NAME] [--timeout 2]
                       [--ca FILE [--cert FILE --key FILE] [--server-name NAME]]

With server.tls, --ca verifies the server; under mTLS (server.tls.client_ca_file) the
probe also needs a client certificate, --cert and --key. The certificate must name the
address probed (127.0.0.1 as an IP SAN), or --server-name gives the name it does hold.

Kubernetes does not use this: its probes call the same RPC natively (deploy/k8s/base).
"""

import argparse
import sys

import grpc

CHECK_METHOD = "/grpc.health.v1.Health/Check"
STATUS_NAMES = {0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}
SERVING = 1


def _varint(value):
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def encode_request(service):
    """HealthCheckRequest{service = 1}; the empty string (whole server) encodes as b''."""
    data = service.encode("utf-8")
    if not data:
        return b""
    return b"\x0a" + _varint(len(data)) + data


def _read_varint(data, pos):
    value, shift = 0, 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ValueError("truncated varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


def decode_status(message):
    """HealthCheckResponse{status = 1} -> the status number (0, UNKNOWN, when absent)."""
    status, pos = 0, 0
    while pos < len(message):
        key, pos = _read_varint(message, pos)
        field, wire_type = key >> 3, key & 7
        if wire_type == 0:
            value, pos = _read_varint(message, pos)
            if field == 1:
                status = value
        elif wire_type == 2:
            length, pos = _read_varint(message, pos)
            pos += length
        elif wire_type == 5:
            pos += 4
        elif wire_type == 1:
            pos += 8
        else:
            raise ValueError(f"unexpected wire type {wire_type}")
        if pos > len(message):
            raise ValueError("truncated message")
    return status


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def check(address, service="", timeout=2.0, ca_file=None, cert_file=None, key_file=None,
          server_name=None):
    """Returns (healthy, text) for one Check call."""
    options = [("grpc.enable_http_proxy", 0)]  # a local probe never goes through a proxy
    if ca_file:
        credentials = grpc.ssl_channel_credentials(
            _read(ca_file), _read(key_file) if key_file else None,
            _read(cert_file) if cert_file else None)
        if server_name:
            options.append(("grpc.ssl_target_name_override", server_name))
        channel = grpc.secure_channel(address, credentials, options=options)
    else:
        channel = grpc.insecure_channel(address, options=options)
    try:
        call = channel.unary_unary(CHECK_METHOD)  # bytes in, bytes out
        reply = call(encode_request(service), timeout=timeout)
        status = decode_status(reply)
    except grpc.RpcError as e:
        return False, f"{address}: {e.code().name}: {e.details()}"
    except ValueError as e:
        return False, f"{address}: bad HealthCheckResponse: {e}"
    finally:
        channel.close()
    name = STATUS_NAMES.get(status, str(status))
    return status == SERVING, f"{address} service '{service}': {name}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--addr", default="127.0.0.1:8700", help="host:port of server.listen")
    parser.add_argument("--service", default="", help="service name; empty: the whole server")
    parser.add_argument("--timeout", type=float, default=2.0, help="seconds")
    parser.add_argument("--ca", default=None, help="PEM CA file when server.listen uses TLS")
    parser.add_argument("--cert", default=None, help="PEM client certificate (mTLS)")
    parser.add_argument("--key", default=None, help="PEM client key (mTLS)")
    parser.add_argument("--server-name", default=None,
                        help="the name the server certificate holds, when not the address")
    args = parser.parse_args(argv)
    if (args.cert is None) != (args.key is None):
        parser.error("--cert and --key go together")
    if (args.cert or args.server_name) and not args.ca:
        parser.error("--cert, --key and --server-name need --ca (TLS)")
    healthy, text = check(args.addr, args.service, args.timeout, args.ca, args.cert, args.key,
                          args.server_name)
    print(text)
    return 0 if healthy else 1


if __name__ == "__main__":
    sys.exit(main())
