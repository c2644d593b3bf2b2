# ggflow's server in a container (docs/DEPLOY.md, "Container").
#
#   docker build -t ggflow .                                  # SmolLM2-135M baked in at /models/model.gguf
#   docker build -t ggflow --build-arg MODEL= .               # no model: mount one at /models
#   docker build -t ggflow --build-arg SETUP_ARGS=--real-models \
#                --build-arg MODEL=qwen2.5-coder-1.5b-instruct-q4_k_m.gguf .
#   docker run -p 8080:8080 ggflow                            # http://127.0.0.1:8080/v1
#   docker build -t ggflow-router --target router .          # vllm-router for deploy/router
#   docker run -p 8080:8080 -v /srv/gguf:/models:ro ggflow -m /models/my.gguf --host 0.0.0.0
#
# The build stage runs the repository's own scripts/setup.sh (Debian packages, .venv, models/)
# and builds the ggflow binary alone; the runtime stage holds that binary, the shared libraries it
# links and the model, and runs as an unprivileged user. ggflow is PID 1 and handles SIGTERM
# itself: it stops admitting, drains running requests for --shutdown-timeout seconds, exits 0.

# ---- build ------------------------------------------------------------------------------------
FROM debian:12 AS build
ARG SETUP_ARGS=
ARG MODEL=smollm2-135m-instruct-q4_1.gguf
WORKDIR /src
COPY . .
# Same set-up as a developer machine (root inside the build, so no sudo). The binary is built
# for the generic x86-64 baseline and picks AVX2 / AVX-512 paths at run time, so the image runs
# on any x86-64 host.
RUN scripts/setup.sh ${SETUP_ARGS} && make build-ggflow BUILD=build
# models/*.gguf are links into .venv: copy the file itself. MODEL empty: no model in the image.
RUN mkdir -p /out/models \
 && if [ -n "${MODEL}" ]; then \
      [ -e "models/${MODEL}" ] || { echo "MODEL=${MODEL} is not in models/: $(ls models)" >&2; exit 1; }; \
      cp -L "models/${MODEL}" /out/models/model.gguf; \
    fi \
 && cp build/ggflow /out/ggflow

# ---- router (optional: `docker build --target router -t ggflow-router .`) --------------------------
# vLLM's router for deploy/router, the version scripts/setup.sh installs and the tests use.
FROM debian:12-slim AS router
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && python3 -m venv /opt/router \
 && /opt/router/bin/pip install --no-cache-dir --disable-pip-version-check vllm-router==0.1.17 \
 && useradd --system --uid 10001 --home-dir /nonexistent --shell /usr/sbin/nologin router
USER 10001:10001
EXPOSE 30000
ENTRYPOINT ["/opt/router/bin/vllm-router"]

# ---- runtime ----------------------------------------------------------------------------------
FROM debian:12-slim
# The shared libraries build/ggflow links (ldd): fmt, PCRE2, cpp-httplib and its TLS/zlib/brotli
# dependencies, the C++ runtime; curl for the health check.
RUN apt-get update \
 && apt-get install -y --no-install-recommends libfmt9 libpcre2-8-0 libcpp-httplib0.11 libstdc++6 libgcc-s1 \
      libssl3 zlib1g libbrotli1 curl ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /nonexistent --shell /usr/sbin/nologin ggflow
COPY --from=build /out/ggflow /usr/local/bin/ggflow
COPY --from=build --chown=10001:10001 /out/models/ /models/
USER 10001:10001
EXPOSE 8080
# /health answers as soon as the server listens (also while the model loads); /ready only once
# the model is loaded and until SIGTERM. Liveness: /health; readiness: /ready.
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 \
  CMD curl -fsS http://127.0.0.1:8080/health >/dev/null || exit 1
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/ggflow", "serve"]
CMD ["-m", "/models/model.gguf", "--host", "0.0.0.0", "--port", "8080", "--shutdown-timeout", "30"]
