"""The gRPC half the Python peer services share (torch_peer.py, ort_peer.py):
fuserank.v1.Ranker over a scoring function, served until interrupted. A request for
another model gets NOT_FOUND and a torch_dlrm.BadRequest INVALID_ARGUMENT, as
fuserank-server answers them.
"""

import sys
from concurrent import futures

import grpc

import proto_stubs
import torch_dlrm


def serve(name, spec, rank, listen, workers):
    """Serves `rank(request) -> [(index, score)]` for the model `spec` on `listen`.

    `name` prefixes the log lines ("<name>: listening on HOST:PORT" once it serves).
    """
    pb2, pb2_grpc = proto_stubs.load()

    class Ranker(pb2_grpc.RankerServicer):
        def Rank(self, request, context):
            if request.model and request.model != spec.name:
                context.abort(grpc.StatusCode.NOT_FOUND, f"no model '{request.model}'")
            try:
                ranked = rank(request)
            except torch_dlrm.BadRequest as e:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
            response = pb2.RankResponse(model_version=spec.version)
            for index, score in ranked:
                response.items.add(item_id=request.candidates[index].item_id, score=score,
                                   index=index)
            return response

    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=workers),
        options=[("grpc.max_receive_message_length", 64 << 20),
                 ("grpc.max_send_message_length", 64 << 20), ("grpc.so_reuseport", 0)])
    pb2_grpc.add_RankerServicer_to_server(Ranker(), server)
    port = server.add_insecure_port(listen)
    if port == 0:
        sys.exit(f"{name}: cannot listen on {listen}")
    server.start()
    host = listen.rsplit(":", 1)[0]
    print(f"{name}: listening on {host}:{port}", flush=True)
    try:
        server.wait_for_termination()
    except KeyboardInterrupt:
        server.stop(1)
