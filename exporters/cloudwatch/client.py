"""The boto3 side: a PutMetricData function with our error classes.  Importing this module
imports boto3 (tens of MB, hundreds of ms), so it is imported only when publishing is on."""

from __future__ import annotations

from typing import Any, cast

import boto3
import botocore.config
import botocore.exceptions

from exporters.cloudwatch.publisher import PutFunction, RejectedError, RetryableError

THROTTLING = {"Throttling", "ThrottlingException", "ThrottledException", "RequestThrottledException",
              "TooManyRequestsException", "RequestLimitExceeded", "SlowDown"}


def make_put(namespace: str, region: str | None, endpoint_url: str | None = None,
             retry_mode: str = "standard") -> tuple[PutFunction, Any]:
    """A blocking put function for the publisher, and the client behind it (credentials and
    region come from boto3's standard chain unless `region` is given)."""
    config = botocore.config.Config(
        retries=cast(Any, {"mode": retry_mode, "max_attempts": 3}),
        connect_timeout=3,
        read_timeout=10,
        user_agent_extra="neuron-monitor",
    )
    client = boto3.session.Session().client("cloudwatch", region_name=region, endpoint_url=endpoint_url,
                                            config=config)

    def put(batch: list[dict[str, Any]]) -> None:
        try:
            client.put_metric_data(Namespace=namespace, MetricData=cast(Any, batch))
        except botocore.exceptions.ClientError as exc:
            error = exc.response.get("Error", {})
            code = str(error.get("Code", ""))
            status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
            message = f"{code or status}: {error.get('Message', '')}".strip()
            if code in THROTTLING or status >= 500 or status == 429:
                raise RetryableError(message) from None
            raise RejectedError(message) from None
        except (botocore.exceptions.EndpointConnectionError, botocore.exceptions.ConnectionClosedError,
                botocore.exceptions.ReadTimeoutError, botocore.exceptions.ConnectTimeoutError,
                botocore.exceptions.ProxyConnectionError, botocore.exceptions.HTTPClientError) as exc:
            raise RetryableError(str(exc)) from None
        except botocore.exceptions.NoCredentialsError as exc:
            raise RetryableError(f"{exc} (credentials may appear later, e.g. an instance role)") from None

    return put, client
