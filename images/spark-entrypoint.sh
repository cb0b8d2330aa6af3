#!/bin/bash
# The container contract of Spark on Kubernetes: Spark starts the driver pod with
# `driver <spark-submit arguments>` and each executor pod with `executor`, passing the
# executor's settings as SPARK_* environment variables (its JVM options as SPARK_JAVA_OPT_<n>).
set -euo pipefail

java_opts_from_env() {
  env | grep '^SPARK_JAVA_OPT_' | sort -t_ -k4 -n | sed 's/^SPARK_JAVA_OPT_[0-9]*=//' || true
}

case "${1:-}" in
  driver)
    shift
    exec "$SPARK_HOME/bin/spark-submit" \
      --conf "spark.driver.bindAddress=${SPARK_DRIVER_BIND_ADDRESS}" \
      --deploy-mode client "$@"
    ;;
  executor)
    shift
    mapfile -t java_opts < <(java_opts_from_env)
    exec java -Xms"${SPARK_EXECUTOR_MEMORY}" -Xmx"${SPARK_EXECUTOR_MEMORY}" "${java_opts[@]}" \
      -cp "$SPARK_HOME/jars/*:${SPARK_CLASSPATH:-}" \
      org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
      --driver-url "${SPARK_DRIVER_URL}" --executor-id "${SPARK_EXECUTOR_ID}" \
      --cores "${SPARK_EXECUTOR_CORES}" --app-id "${SPARK_APPLICATION_ID}" \
      --hostname "${SPARK_EXECUTOR_POD_IP}" --resourceProfileId "${SPARK_RESOURCE_PROFILE_ID}" \
      --podName "${SPARK_EXECUTOR_POD_NAME}"
    ;;
  *)
    exec "$@"
    ;;
esac
