# syntax=docker/dockerfile:1
# Multi-stage: dependencies are installed (and native modules built) in a full image, then only
# production dependencies and the sources are copied onto a slim Node 24 runtime. No build step:
# Node runs the TypeScript sources directly through type stripping.

FROM node:24-bookworm AS deps
WORKDIR /app
COPY package.json package-lock.json .npmrc ./
RUN npm ci --omit=dev --no-audit --no-fund

FROM node:24-bookworm-slim AS runtime
# MALLOC_ARENA_MAX: as `npm start` sets it (glibc; docs/operations.md#sizing).
ENV PORT=8080 \
    HOST=0.0.0.0 \
    DATA_DIR=/data \
    MALLOC_ARENA_MAX=2
WORKDIR /app
# The code_execution sandbox: bubblewrap, setpriv/prlimit, libseccomp (its filter is compiled at
# start-up) and Debian's python3 under /usr. See docs/sandbox.md for the container's options.
# Tesseract with English data reads scanned PDF pages (docs/ingestion.md; more languages:
# tesseract-ocr-<lang> packages and OCR_LANGUAGES).
RUN apt-get update \
  && apt-get install -y --no-install-recommends bubblewrap util-linux gcc libc6-dev libseccomp-dev python3-minimal \
     tesseract-ocr tesseract-ocr-eng \
  && rm -rf /var/lib/apt/lists/*
COPY --from=deps /app/node_modules ./node_modules
COPY package.json ./
COPY src ./src
COPY migrations ./migrations
RUN mkdir -p /data && chown node:node /data
USER node
VOLUME ["/data"]
EXPOSE 8080
# SIGTERM drains (SHUTDOWN_TIMEOUT_MS); give the container longer than that before SIGKILL.
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=15s --timeout=3s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||8080)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
CMD ["node", "--max-semi-space-size=16", "src/start.mjs"]
